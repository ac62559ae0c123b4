// Tree-walking renderer for parsed chat templates: statements write to an output string,
// expressions evaluate with Python semantics (operators, truthiness, and/or returning operands).
#include "template/jinja_eval.h"

#include <cstdint>
#include <memory>
#include <optional>

#include "core/error.h"
#include "template/jinja_builtins.h"

namespace lite_llama::jinja {

namespace {

struct Scope {
  Scope* parent = nullptr;
  Dict vars;

  const Value* lookup(std::string_view name) const {
    for (const Scope* s = this; s; s = s->parent)
      if (const Value* v = s->vars.find(name)) return v;
    return nullptr;
  }
};

enum class Flow { kNormal, kBreak, kContinue };

void bind_targets(const std::vector<std::string>& targets, const Value& v, Scope& sc) {
  if (targets.size() == 1) {
    sc.vars.set(targets[0], v);
    return;
  }
  std::vector<Value> parts = iterate(v);
  if (parts.size() != targets.size())
    fail("cannot unpack {} values into {} names", parts.size(), targets.size());
  for (size_t k = 0; k < targets.size(); ++k) sc.vars.set(targets[k], parts[k]);
}

// Bounds on one rendering, which jinja2 leaves to the host: a chat template is untrusted input
// (it comes with the model), and nested loops or a string doubled in a loop would otherwise run
// for hours or take all memory. A real template renders a 1,000-message conversation in a few
// percent of these steps, and a context's worth of text is far below the byte bound.
constexpr int64_t kMaxSteps = 1'000'000;  // statements executed and loop iterations (~1 s)
constexpr size_t kMaxText = size_t(8) << 20;   // bytes of the output and of any one string
constexpr size_t kMaxItems = size_t(1) << 18;  // items of any one list

// Expression half of the renderer. line_ follows evaluation so that errors name the line.
class Evaluator {
 protected:
  Value eval(const Expr& e, Scope& sc) {
    Value v = eval_expr(e, sc);
    if ((v.is_string() && v.s.size() > kMaxText) || (v.is_list() && v.list->size() > kMaxItems))
      fail("a {} of more than {} {} is larger than the renderer allows", type_name(v),
           v.is_string() ? kMaxText : kMaxItems, v.is_string() ? "bytes" : "items");
    return v;
  }

  Value eval_expr(const Expr& e, Scope& sc) {
    line_ = e.line;
    switch (e.kind) {
      case Expr::Kind::kLiteral:
        return e.value;
      case Expr::Kind::kName: {
        const Value* v = sc.lookup(e.name);
        return v ? *v : Value::undefined(e.name);
      }
      case Expr::Kind::kList:
      case Expr::Kind::kTuple: {
        ValueList items;
        for (const auto& x : e.args) items.push_back(eval(*x, sc));
        if (e.kind == Expr::Kind::kTuple) return Value::make_tuple(std::move(items));
        return Value::make_list(std::move(items));
      }
      case Expr::Kind::kDict: {
        Dict d;
        for (size_t k = 0; k + 1 < e.args.size(); k += 2) {
          Value key = eval(*e.args[k], sc);
          if (!key.is_string()) fail("dict literal keys must be strings, got {}", type_name(key));
          d.set(key.s, eval(*e.args[k + 1], sc));
        }
        return Value::make_dict(std::move(d));
      }
      case Expr::Kind::kAttr: {
        Value obj = eval(*e.a, sc);
        return get_attr(obj, e.name);
      }
      case Expr::Kind::kItem: {
        Value obj = eval(*e.a, sc);
        Value key = eval(*e.b, sc);
        return get_item(obj, key);
      }
      case Expr::Kind::kSlice: {
        Value obj = eval(*e.a, sc);
        Value parts[3];
        for (int k = 0; k < 3; ++k) parts[k] = e.args[k] ? eval(*e.args[k], sc) : Value::none();
        line_ = e.line;
        return get_slice(obj, parts[0], parts[1], parts[2]);
      }
      case Expr::Kind::kCall: {
        Value fn = eval(*e.a, sc);
        CallArgs args = eval_args(e, sc);
        line_ = e.line;
        return call(fn, args);
      }
      case Expr::Kind::kFilter: {
        Value input = eval(*e.a, sc);
        CallArgs args = eval_args(e, sc);
        line_ = e.line;
        return apply_filter(e.name, input, args);
      }
      case Expr::Kind::kTest: {
        Value v = eval(*e.a, sc);
        CallArgs args = eval_args(e, sc);
        line_ = e.line;
        return Value::boolean(apply_test(e.name, v, args) != e.negated);
      }
      case Expr::Kind::kUnary: {
        Value v = eval(*e.a, sc);
        line_ = e.line;
        return unary_op(e.name, v);
      }
      case Expr::Kind::kBinary:
        return eval_binary(e, sc);
      case Expr::Kind::kCompare: {
        Value left = eval(*e.a, sc);
        for (size_t k = 0; k < e.ops.size(); ++k) {
          Value right = eval(*e.args[k], sc);
          line_ = e.line;
          if (!compare_op(e.ops[k], left, right)) return Value::boolean(false);
          left = std::move(right);
        }
        return Value::boolean(true);
      }
      case Expr::Kind::kCond:
        if (truthy(eval(*e.b, sc))) return eval(*e.a, sc);
        return e.c ? eval(*e.c, sc) : Value::undefined();
    }
    return Value::undefined();
  }

  // Functions, and objects that are also callable (a for loop's `loop`).
  static Value call(const Value& fn, CallArgs& args) {
    if (fn.is_undefined()) undefined_error(fn);
    if (!fn.fn) fail("'{}' object is not callable", type_name(fn));
    return (*fn.fn)(args);
  }

  Value eval_binary(const Expr& e, Scope& sc) {
    Value l = eval(*e.a, sc);
    if (e.name == "and") return truthy(l) ? eval(*e.b, sc) : l;
    if (e.name == "or") return truthy(l) ? l : eval(*e.b, sc);
    Value r = eval(*e.b, sc);
    line_ = e.line;
    // str + str in place: a chain like '<|im_start|>' + role + content + '<|im_end|>' then
    // copies a long content once or twice instead of once per '+'.
    if (e.name == "+" && l.is_string() && r.is_string()) {
      l.s += r.s;
      return l;
    }
    return binary_op(e.name, l, r);
  }

  Value apply_filters(const std::vector<ExprPtr>& chain, Value v, Scope& sc) {
    for (const auto& f : chain) {
      CallArgs args = eval_args(*f, sc);
      line_ = f->line;
      v = apply_filter(f->name, v, args);
    }
    return v;
  }

  CallArgs eval_args(const Expr& e, Scope& sc) {
    CallArgs args;
    for (const auto& x : e.args) args.pos.push_back(eval(*x, sc));
    for (const auto& [k, x] : e.kwargs) args.kw.emplace_back(k, eval(*x, sc));
    return args;
  }

  int line_ = 0;
};

// Statement half: output, control flow, assignments and macros.
class Renderer : private Evaluator {
 public:
  std::string run(const Body& body, const Dict& context) {
    Scope root;
    add_globals(root.vars);
    for (const auto& [k, v] : context.items) root.vars.set(k, v);
    root_ = &root;
    std::string out;
    try {
      exec_body(body, root, out);
      if (out.size() > kMaxText) fail("the rendered text is larger than {} bytes", kMaxText);
    } catch (const Error& e) {
      throw Error(fmt::format("chat template line {}: {}", line_, e.what()));
    }
    return out;
  }

 private:
  Flow exec_body(const Body& body, Scope& sc, std::string& out) {
    for (const auto& s : body) {
      Flow f = exec(*s, sc, out);
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

  Flow exec(const Stmt& s, Scope& sc, std::string& out) {
    line_ = s.line;
    step();
    if (out.size() > kMaxText) fail("the rendered text is larger than {} bytes", kMaxText);
    switch (s.kind) {
      case Stmt::Kind::kText:
        out += s.text;
        return Flow::kNormal;
      case Stmt::Kind::kOutput: {
        const Value v = eval(*s.expr, sc);
        if (v.is_string())
          out += v.s;  // to_str would copy it first
        else
          out += to_str(v);
        return Flow::kNormal;
      }
      case Stmt::Kind::kIf:
        for (const auto& [cond, body] : s.branches)
          if (truthy(eval(*cond, sc))) return exec_body(body, sc, out);
        return exec_body(s.else_body, sc, out);
      case Stmt::Kind::kFor:
        return exec_for(s, sc, out);
      case Stmt::Kind::kSet:
        exec_set(s, sc);
        return Flow::kNormal;
      case Stmt::Kind::kSetBlock: {
        std::string captured;
        exec_body(s.body, sc, captured);
        sc.vars.set(s.text, apply_filters(s.filters, Value::string(captured), sc));
        return Flow::kNormal;
      }
      case Stmt::Kind::kMacro:
        sc.vars.set(s.text, make_macro(s, sc));
        return Flow::kNormal;
      case Stmt::Kind::kBreak:
        return Flow::kBreak;
      case Stmt::Kind::kContinue:
        return Flow::kContinue;
      case Stmt::Kind::kFilterBlock: {
        std::string captured;
        exec_body(s.body, sc, captured);
        out += to_str(apply_filters(s.filters, Value::string(captured), sc));
        return Flow::kNormal;
      }
      case Stmt::Kind::kWith: {
        Scope inner{&sc, {}};
        for (const auto& [name, expr] : s.params) inner.vars.set(name, eval(*expr, sc));
        return exec_body(s.body, inner, out);
      }
      case Stmt::Kind::kPlain:
        return exec_body(s.body, sc, out);
      case Stmt::Kind::kCallBlock: {
        // m(args, caller=<the block's body as a macro>), as jinja2 compiles it.
        Value caller = make_macro(s, sc);
        Value fn = eval(*s.expr->a, sc);
        CallArgs args = eval_args(*s.expr, sc);
        args.kw.emplace_back("caller", std::move(caller));
        line_ = s.line;
        Value v = call(fn, args);
        out += v.is_string() ? v.s : to_str(v);
        return Flow::kNormal;
      }
    }
    return Flow::kNormal;
  }

  Flow exec_for(const Stmt& s, Scope& sc, std::string& out) {
    return run_loop(s, sc, iterate(eval(*s.expr, sc)), 1, out);
  }

  // One level of a for loop; a recursive loop's loop(items) runs the next level in the scope
  // the for statement ran in, as jinja2's loop function does (else block included).
  Flow run_loop(const Stmt& s, Scope& sc, std::vector<Value> items, int64_t depth,
                std::string& out) {
    if (s.cond) {  // `for x in xs if cond`: loop.index and loop.length count only kept items
      std::vector<Value> kept;
      for (auto& item : items) {
        Scope probe{&sc, {}};
        bind_targets(s.targets, item, probe);
        if (truthy(eval(*s.cond, probe))) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    if (items.empty()) return exec_body(s.else_body, sc, out);
    const int64_t n = static_cast<int64_t>(items.size());
    auto last_changed = std::make_shared<std::optional<ValueList>>();  // loop.changed()'s memory
    // loop(items) holds a reference to `sc`: refuse calls once this level has returned (a
    // loop object stored in a namespace and called later).
    auto alive = std::make_shared<bool>(true);
    struct Expire {
      std::shared_ptr<bool> flag;
      ~Expire() { *flag = false; }
    } expire{alive};
    auto recurse = std::make_shared<NativeFn>([this, &s, &sc, depth, alive](CallArgs& a) {
      if (!s.recursive)
        fail("the loop must have the 'recursive' marker to be called recursively");
      if (!*alive) fail("loop() called after its loop has ended");
      if (a.pos.size() != 1 || !a.kw.empty()) fail("loop() takes exactly one argument");
      if (++macro_depth_ > kMaxMacroDepth) fail("maximum recursion depth exceeded in a recursive loop");
      int saved_line = line_;
      std::string inner;
      run_loop(s, sc, iterate(a.pos[0]), depth + 1, inner);
      line_ = saved_line;
      --macro_depth_;
      return Value::string(std::move(inner));
    });
    for (int64_t k = 0; k < n; ++k) {
      step();
      Scope it{&sc, {}};
      bind_targets(s.targets, items[k], it);
      Dict loop;
      loop.set("index", Value::integer(k + 1));
      loop.set("index0", Value::integer(k));
      loop.set("revindex", Value::integer(n - k));
      loop.set("revindex0", Value::integer(n - k - 1));
      loop.set("first", Value::boolean(k == 0));
      loop.set("last", Value::boolean(k == n - 1));
      loop.set("length", Value::integer(n));
      loop.set("depth", Value::integer(depth));
      loop.set("depth0", Value::integer(depth - 1));
      loop.set("previtem", k > 0 ? items[k - 1] : Value::undefined("previtem"));
      loop.set("nextitem", k + 1 < n ? items[k + 1] : Value::undefined("nextitem"));
      loop.set("cycle", Value::function("cycle", [k](CallArgs& a) {
                 if (a.pos.empty()) fail("loop.cycle() needs at least one argument");
                 return a.pos[static_cast<size_t>(k) % a.pos.size()];
               }));
      loop.set("changed", Value::function("changed", [last_changed](CallArgs& a) {
                 Value now = Value::make_list(a.pos);
                 if (*last_changed && equals(Value::make_list(**last_changed), now))
                   return Value::boolean(false);
                 *last_changed = a.pos;
                 return Value::boolean(true);
               }));
      Value loop_value = Value::make_dict(std::move(loop));
      loop_value.fn = recurse;
      it.vars.set("loop", std::move(loop_value));
      if (exec_body(s.body, it, out) == Flow::kBreak) break;
    }
    return Flow::kNormal;
  }

  void exec_set(const Stmt& s, Scope& sc) {
    Value v = eval(*s.expr, sc);
    if (s.attr.empty()) {
      bind_targets(s.targets, v, sc);
      return;
    }
    const Value* ns = sc.lookup(s.text);
    if (!ns || ns->is_undefined()) fail("'{}' is undefined", s.text);
    if (ns->kind != Value::Kind::kNamespace)
      fail("cannot assign attribute '{}' on '{}', which is not a namespace() object", s.attr,
           s.text);
    ns->dict->set(s.attr, std::move(v));
  }

  // A macro sees template-level names as they are when it is called, and the names of enclosing
  // loops/with blocks as they were when it was defined (jinja2 compiles those into a closure).
  // The snapshot also keeps the macro valid if it outlives the scope that defined it.
  Value make_macro(const Stmt& s, const Scope& defining) {
    const Stmt* macro = &s;
    auto closure = std::make_shared<Scope>(Scope{root_, {}});
    for (const Scope* sc = &defining; sc && sc != root_; sc = sc->parent)
      for (const auto& [k, v] : sc->vars.items)
        if (!closure->vars.find(k)) closure->vars.items.emplace_back(k, v);
    Value fn = Value::function(s.text, [this, macro, closure](CallArgs& a) {
      Scope sc{closure.get(), {}};
      bind_macro_args(*macro, a, sc);
      // jinja2 stops runaway recursion with Python's RecursionError; without a limit a template
      // that calls itself forever would overflow the C++ stack.
      if (++macro_depth_ > kMaxMacroDepth)
        fail("maximum recursion depth exceeded in macro '{}'", macro->text);
      int saved_line = line_;
      std::string out;
      exec_body(macro->body, sc, out);
      line_ = saved_line;
      --macro_depth_;
      return Value::string(std::move(out));
    });
    // jinja2's Macro attributes: m.name, m.arguments, m.catch_kwargs ...
    Dict attrs;
    ValueList names;
    for (const auto& p : s.params) names.push_back(Value::string(p.first));
    // A call block's body is jinja2's anonymous macro (name None).
    attrs.set("name", s.kind == Stmt::Kind::kCallBlock ? Value::none() : Value::string(s.text));
    attrs.set("arguments", Value::make_tuple(std::move(names)));
    attrs.set("catch_kwargs", Value::boolean(s.uses_kwargs));
    attrs.set("catch_varargs", Value::boolean(s.uses_varargs));
    attrs.set("caller", Value::boolean(s.uses_caller));
    fn.dict = std::make_shared<Dict>(std::move(attrs));
    return fn;
  }

  // jinja2's Macro.__call__: positional, then keyword, then defaults; `caller`, `varargs` and
  // `kwargs` only for a body that reads them, and extra arguments fail otherwise.
  void bind_macro_args(const Stmt& macro, CallArgs& a, Scope& sc) {
    const auto& params = macro.params;
    std::vector<std::pair<std::string, Value>> kw = a.kw;
    auto take_kw = [&kw](const std::string& name) -> std::optional<Value> {
      for (size_t k = 0; k < kw.size(); ++k)
        if (kw[k].first == name) {
          Value v = std::move(kw[k].second);
          kw.erase(kw.begin() + static_cast<std::ptrdiff_t>(k));
          return v;
        }
      return std::nullopt;
    };
    std::vector<std::optional<Value>> given(params.size());
    for (size_t k = 0; k < params.size(); ++k)
      given[k] = k < a.pos.size() ? std::optional<Value>(a.pos[k]) : take_kw(params[k].first);
    if (macro.uses_caller) {
      std::optional<Value> caller = take_kw("caller");
      sc.vars.set("caller", caller ? *caller : Value::undefined("caller"));
    }
    if (macro.uses_kwargs) {
      Dict rest;
      for (auto& [k, v] : kw) rest.set(k, std::move(v));
      sc.vars.set("kwargs", Value::make_dict(std::move(rest)));
    } else if (!kw.empty()) {
      bool has_caller = false;
      for (const auto& [k, v] : kw) has_caller = has_caller || k == "caller";
      if (has_caller)
        fail("macro '{}' was invoked with two values for the special caller argument (it does "
             "not use caller())", macro.text);
      fail("macro '{}' takes no keyword argument '{}'", macro.text, kw[0].first);
    }
    if (macro.uses_varargs) {
      ValueList rest;
      for (size_t k = params.size(); k < a.pos.size(); ++k) rest.push_back(a.pos[k]);
      sc.vars.set("varargs", Value::make_tuple(std::move(rest)));
    } else if (a.pos.size() > params.size()) {
      fail("macro '{}' takes not more than {} argument(s)", macro.text, params.size());
    }
    // Defaults are evaluated in order, each seeing the parameters before it.
    for (size_t k = 0; k < params.size(); ++k) {
      const auto& [name, dflt] = params[k];
      sc.vars.set(name, given[k] ? *given[k] : dflt ? eval(*dflt, sc) : Value::undefined(name));
    }
  }

  void step() {
    if (++steps_ > kMaxSteps) fail("the template takes more than {} steps (statements and loop iterations)", kMaxSteps);
  }

  static constexpr int kMaxMacroDepth = 200;
  Scope* root_ = nullptr;
  int macro_depth_ = 0;
  int64_t steps_ = 0;
};

}  // namespace

std::string render(const Body& body, const Dict& context) { return Renderer().run(body, context); }

}  // namespace lite_llama::jinja
