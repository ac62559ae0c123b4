// Syntax tree of a parsed chat template. Node kinds mirror jinja2's (Getattr, Getitem, Filter,
// Test, CondExpr, For, If, Assign, Macro ...) so that evaluation can follow jinja2's rules.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/jinja_value.h"

namespace lite_llama::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Expr {
  enum class Kind {
    kLiteral,  // value
    kName,     // name
    kList,     // args = items
    kTuple,    // args = items (evaluated as a list)
    kDict,     // args = key0, value0, key1, value1 ...
    kAttr,     // a.name
    kItem,     // a[b]
    kSlice,    // a[args[0]:args[1]:args[2]] (entries may be null)
    kCall,     // a(args, kwargs)
    kFilter,   // a|name(args, kwargs); a is null inside {% filter %} blocks
    kTest,     // a is [not] name(args)
    kUnary,    // name in {"-", "+", "not"}, operand a
    kBinary,   // name in {"+", "-", "*", "/", "//", "%", "**", "~", "and", "or"}
    kCompare,  // a ops[0] args[0] ops[1] args[1] ... (chained like Python)
    kCond,     // a if b else c (c may be null)
  };
  Kind kind = Kind::kLiteral;
  int line = 0;
  int col = 0;
  Value value;
  std::string name;
  ExprPtr a, b, c;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
  bool negated = false;
};

struct Stmt {
  enum class Kind {
    kText,      // text
    kOutput,    // {{ expr }}
    kIf,        // branches (cond, body) ... ; else_body
    kFor,       // targets in expr [if cond]: body; else_body
    kSet,       // targets = expr, or ns_attr: text.attr = expr
    kSetBlock,  // {% set text %}body{% endset %}, filters applied to the captured text
    kMacro,     // text(params): body
    kBreak,
    kContinue,
    kFilterBlock,  // {% filter f %}body{% endfilter %}
    kWith,         // {% with params %}body{% endwith %}: a new scope
    kPlain,        // a body rendered in the current scope ({% generation %})
    kCallBlock,    // {% call(params) expr %}body{% endcall %}: body is the caller macro
  };
  Kind kind = Kind::kText;
  int line = 0;
  int col = 0;
  std::string text;
  std::string attr;
  ExprPtr expr;
  ExprPtr cond;
  std::vector<std::string> targets;
  std::vector<std::pair<ExprPtr, Body>> branches;
  std::vector<std::pair<std::string, ExprPtr>>
      params;  // macro params (default may be null), with-assignments
  std::vector<ExprPtr> filters;
  Body body;
  Body else_body;
  bool recursive = false;  // `for ... recursive`: loop(items) renders the body one level deeper
  // Macros and call blocks: which of jinja2's implicit parameters the body reads (caller,
  // varargs, kwargs); a macro without them refuses extra arguments.
  bool uses_caller = false;
  bool uses_varargs = false;
  bool uses_kwargs = false;
};

// Parses a template; throws lite_llama::Error naming line, column and construct on syntax the
// engine does not support.
Body parse_template(std::string_view source);

}  // namespace lite_llama::jinja
