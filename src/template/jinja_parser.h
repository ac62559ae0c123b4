// Parser of the Jinja-subset engine (internal): statements in jinja_parser.cpp, expressions in
// jinja_expr_parser.cpp. It follows jinja2's grammar and operator precedence (parser.py):
// condexpr < or < and < not < compare < +,- < ~ < *,/,//,% < ** < unary < postfix/filters/tests.
#pragma once
#include <string>
#include <unordered_set>
#include <vector>

#include "template/jinja_ast.h"
#include "template/jinja_lexer.h"

namespace lite_llama::jinja {

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : t_(std::move(toks)) {}

  Body parse_all() {
    std::string end;
    Body body = subparse({}, &end);
    return body;
  }

 private:
  // ---- statements ----
  // Parses statements until a block tag whose name is in `ends` (left unconsumed, its name
  // stored in *end); at EOF with `ends` non-empty the caller reports the unclosed block.
  Body subparse(const std::unordered_set<std::string>& ends, std::string* end);
  // Parses a nested body up to one of `ends`; errors if the template ends first.
  Body body_until(const Token& open, const std::string& tag,
                  const std::unordered_set<std::string>& ends, std::string* end);
  StmtPtr parse_statement();
  StmtPtr parse_if(const Token& open);
  StmtPtr parse_for(const Token& open);
  std::vector<std::string> parse_targets();
  StmtPtr parse_set(const Token& open);
  StmtPtr parse_macro(const Token& open);
  StmtPtr parse_call_block(const Token& open);
  // `(a, b=1)` of a macro or call block.
  void parse_signature(Stmt& s);
  // The body up to `end<tag>`, and which of caller/varargs/kwargs it reads.
  void parse_macro_body(const Token& open, Stmt& s, const char* tag);
  StmtPtr parse_filter_block(const Token& open);
  StmtPtr parse_with(const Token& open);

  // ---- expressions ----
  // A comma-separated tuple or a single expression; stop_at_if leaves a for loop's `if` filter.
  ExprPtr parse_tuple(bool with_cond, bool stop_at_if = false);
  ExprPtr parse_expression(bool with_cond);
  ExprPtr binary(const Token& tok, const std::string& op, ExprPtr l, ExprPtr r);
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_list();
  ExprPtr parse_dict();
  ExprPtr parse_postfix(ExprPtr e);
  ExprPtr parse_subscript(const Token& tok, ExprPtr obj);
  void parse_call_args(Expr& e);
  ExprPtr parse_call(ExprPtr callee);
  ExprPtr parse_filter_expr(ExprPtr e);
  // `| f1(args) | f2 ...`; each filter's input (a) is left for the caller to fill in.
  void parse_filter_chain(std::vector<ExprPtr>& chain, bool first_pipe = true);
  ExprPtr parse_test(ExprPtr e);

  // ---- token helpers ----
  const Token& cur() const { return t_[p_]; }
  bool is_op(const char* op) const { return cur().type == TokType::kOp && cur().text == op; }
  bool is_name(const char* n) const { return cur().type == TokType::kName && cur().text == n; }
  bool is_block_end() const { return cur().type == TokType::kBlockEnd; }

  void expect(TokType type, const char* what) {
    if (cur().type != type) error(cur(), std::string("expected ") + what + describe(cur()));
    ++p_;
  }
  void expect_op(const char* op) {
    if (!is_op(op)) error(cur(), std::string("expected '") + op + "'" + describe(cur()));
    ++p_;
  }
  void expect_name(const char* n) {
    if (!is_name(n)) error(cur(), std::string("expected '") + n + "'" + describe(cur()));
    ++p_;
  }
  static std::string describe(const Token& t) {
    switch (t.type) {
      case TokType::kEof:
        return ", got the end of the template";
      case TokType::kBlockEnd:
        return ", got '%}'";
      case TokType::kVarEnd:
        return ", got '}}'";
      case TokType::kText:
        return ", got template text";
      default:
        return ", got '" + t.text + "'";
    }
  }

  [[noreturn]] void error(const Token& t, const std::string& msg) const {
    syntax_error(t.line, t.col, msg);
  }

  static StmtPtr make_stmt(Stmt::Kind k, const Token& t) {
    auto s = std::make_unique<Stmt>();
    s->kind = k;
    s->line = t.line;
    s->col = t.col;
    return s;
  }
  static ExprPtr make_expr(Expr::Kind k, const Token& t) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = t.line;
    e->col = t.col;
    return e;
  }

  // Nesting limit for expressions and blocks: the parser recurses, and a hostile template must
  // not overflow the stack.
  static constexpr int kMaxNesting = 200;
  struct NestingGuard {
    Parser& p;
    NestingGuard(Parser& parser, const Token& at) : p(parser) {
      if (++p.nesting_ > kMaxNesting) p.error(at, "template nesting is too deep");
    }
    ~NestingGuard() { --p.nesting_; }
  };

  std::vector<Token> t_;
  size_t p_ = 0;
  int loop_depth_ = 0;
  int nesting_ = 0;
};

}  // namespace lite_llama::jinja
