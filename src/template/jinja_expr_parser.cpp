// Expression half of the chat template parser (see jinja_parser.h): literals, operators by
// jinja2's precedence, attribute/subscript/slice/call postfixes, filters and tests. Unknown
// filters and tests fail at parse time, as jinja2's compiler does.
#include "core/error.h"
#include "template/jinja_bigint.h"
#include "template/jinja_builtins.h"
#include "template/jinja_parser.h"

namespace lite_llama::jinja {

namespace {
// Integer literals are Python ints: ones past 64 bits stay exact.
Value int_literal(const Token& t) {
  auto big = BigInt::parse(t.text);
  return big ? Value::integer(std::move(*big)) : Value::integer(t.ival);
}
}  // namespace

// A comma-separated tuple or a single expression; stop_at_if leaves a for loop's `if` filter.
ExprPtr Parser::parse_tuple(bool with_cond, bool stop_at_if) {
  const Token& start = cur();
  ExprPtr first = with_cond && !stop_at_if ? parse_expression(true) : parse_or();
  if (!is_op(",")) return first;
  auto tuple = make_expr(Expr::Kind::kTuple, start);
  tuple->args.push_back(std::move(first));
  while (is_op(",")) {
    ++p_;
    if (is_block_end() || cur().type == TokType::kVarEnd || is_op(")") || is_name("if")) break;
    tuple->args.push_back(with_cond && !stop_at_if ? parse_expression(true) : parse_or());
  }
  return tuple;
}

ExprPtr Parser::parse_expression(bool with_cond) {
  if (!with_cond) return parse_or();
  ExprPtr e = parse_or();
  while (is_name("if")) {
    const Token& tok = cur();
    ++p_;
    auto c = make_expr(Expr::Kind::kCond, tok);
    c->b = parse_or();
    c->a = std::move(e);
    if (is_name("else")) {
      ++p_;
      c->c = parse_expression(true);
    }
    e = std::move(c);
  }
  return e;
}

ExprPtr Parser::binary(const Token& tok, const std::string& op, ExprPtr l, ExprPtr r) {
  auto e = make_expr(Expr::Kind::kBinary, tok);
  e->name = op;
  e->a = std::move(l);
  e->b = std::move(r);
  return e;
}

ExprPtr Parser::parse_or() {
  ExprPtr l = parse_and();
  while (is_name("or")) {
    const Token& tok = cur();
    ++p_;
    l = binary(tok, "or", std::move(l), parse_and());
  }
  return l;
}

ExprPtr Parser::parse_and() {
  ExprPtr l = parse_not();
  while (is_name("and")) {
    const Token& tok = cur();
    ++p_;
    l = binary(tok, "and", std::move(l), parse_not());
  }
  return l;
}

ExprPtr Parser::parse_not() {
  NestingGuard guard(*this, cur());
  if (is_name("not")) {
    const Token& tok = cur();
    ++p_;
    auto e = make_expr(Expr::Kind::kUnary, tok);
    e->name = "not";
    e->a = parse_not();
    return e;
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  const Token& start = cur();
  ExprPtr first = parse_math1();
  ExprPtr cmp;
  while (true) {
    std::string op;
    if (cur().type == TokType::kOp &&
        (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" ||
         cur().text == ">" || cur().text == ">=")) {
      op = cur().text;
      ++p_;
    } else if (is_name("in")) {
      op = "in";
      ++p_;
    } else if (is_name("not") && t_[p_ + 1].type == TokType::kName && t_[p_ + 1].text == "in") {
      op = "notin";
      p_ += 2;
    } else {
      break;
    }
    if (!cmp) {
      cmp = make_expr(Expr::Kind::kCompare, start);
      cmp->a = std::move(first);
    }
    cmp->ops.push_back(op);
    cmp->args.push_back(parse_math1());
  }
  return cmp ? std::move(cmp) : std::move(first);
}

ExprPtr Parser::parse_math1() {
  ExprPtr l = parse_concat();
  while (is_op("+") || is_op("-")) {
    const Token& tok = cur();
    ++p_;
    l = binary(tok, tok.text, std::move(l), parse_concat());
  }
  return l;
}

ExprPtr Parser::parse_concat() {
  ExprPtr l = parse_math2();
  while (is_op("~")) {
    const Token& tok = cur();
    ++p_;
    l = binary(tok, "~", std::move(l), parse_math2());
  }
  return l;
}

ExprPtr Parser::parse_math2() {
  ExprPtr l = parse_pow();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    const Token& tok = cur();
    ++p_;
    l = binary(tok, tok.text, std::move(l), parse_pow());
  }
  return l;
}

ExprPtr Parser::parse_pow() {
  ExprPtr l = parse_unary(true);
  while (is_op("**")) {
    const Token& tok = cur();
    ++p_;
    l = binary(tok, "**", std::move(l), parse_unary(true));
  }
  return l;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  const Token& tok = cur();
  NestingGuard guard(*this, tok);
  ExprPtr e;
  if (is_op("-") || is_op("+")) {
    ++p_;
    e = make_expr(Expr::Kind::kUnary, tok);
    e->name = tok.text;
    e->a = parse_unary(false);
  } else {
    e = parse_primary();
  }
  e = parse_postfix(std::move(e));
  if (with_filter) e = parse_filter_expr(std::move(e));
  return e;
}

ExprPtr Parser::parse_primary() {
  const Token& tok = cur();
  switch (tok.type) {
    case TokType::kName: {
      ++p_;
      auto e = make_expr(Expr::Kind::kLiteral, tok);
      if (tok.text == "true" || tok.text == "True") {
        e->value = Value::boolean(true);
      } else if (tok.text == "false" || tok.text == "False") {
        e->value = Value::boolean(false);
      } else if (tok.text == "none" || tok.text == "None") {
        e->value = Value::none();
      } else {
        e->kind = Expr::Kind::kName;
        e->name = tok.text;
      }
      return e;
    }
    case TokType::kString: {
      std::string s;
      while (cur().type == TokType::kString) s += t_[p_++].text;  // adjacent literals concatenate
      auto e = make_expr(Expr::Kind::kLiteral, tok);
      e->value = Value::string(std::move(s));
      return e;
    }
    case TokType::kInt:
    case TokType::kFloat: {
      ++p_;
      auto e = make_expr(Expr::Kind::kLiteral, tok);
      e->value = tok.type == TokType::kInt ? int_literal(tok) : Value::number(tok.fval);
      return e;
    }
    case TokType::kOp:
      if (tok.text == "(") {
        ++p_;
        if (is_op(")")) {
          ++p_;
          return make_expr(Expr::Kind::kTuple, tok);
        }
        ExprPtr inner = parse_tuple(true);
        expect_op(")");
        return inner;
      }
      if (tok.text == "[") return parse_list();
      if (tok.text == "{") return parse_dict();
      break;
    default:
      break;
  }
  error(tok, tok.type == TokType::kVarEnd || tok.type == TokType::kBlockEnd
                 ? "unexpected end of tag"
                 : "unexpected '" + tok.text + "'");
}

ExprPtr Parser::parse_list() {
  auto e = make_expr(Expr::Kind::kList, cur());
  ++p_;
  while (!is_op("]")) {
    if (!e->args.empty()) {
      expect_op(",");
      if (is_op("]")) break;
    }
    e->args.push_back(parse_expression(true));
  }
  ++p_;
  return e;
}

ExprPtr Parser::parse_dict() {
  auto e = make_expr(Expr::Kind::kDict, cur());
  ++p_;
  while (!is_op("}")) {
    if (!e->args.empty()) {
      expect_op(",");
      if (is_op("}")) break;
    }
    e->args.push_back(parse_expression(true));
    expect_op(":");
    e->args.push_back(parse_expression(true));
  }
  ++p_;
  return e;
}

ExprPtr Parser::parse_postfix(ExprPtr e) {
  while (true) {
    const Token& tok = cur();
    if (is_op(".")) {
      ++p_;
      const Token& n = cur();
      if (n.type == TokType::kName) {
        auto a = make_expr(Expr::Kind::kAttr, tok);
        a->name = n.text;
        a->a = std::move(e);
        e = std::move(a);
      } else if (n.type == TokType::kInt) {
        auto a = make_expr(Expr::Kind::kItem, tok);
        a->a = std::move(e);
        a->b = make_expr(Expr::Kind::kLiteral, n);
        a->b->value = int_literal(n);
        e = std::move(a);
      } else {
        error(n, "expected an attribute name after '.'");
      }
      ++p_;
    } else if (is_op("[")) {
      ++p_;
      e = parse_subscript(tok, std::move(e));
    } else if (is_op("(")) {
      e = parse_call(std::move(e));
    } else {
      return e;
    }
  }
}

ExprPtr Parser::parse_subscript(const Token& tok, ExprPtr obj) {
  ExprPtr parts[3];
  int colons = 0;
  while (!is_op("]")) {
    if (is_op(":")) {
      if (++colons > 2) error(cur(), "too many ':' in slice");
      ++p_;
      continue;
    }
    if (parts[colons]) error(cur(), "unsupported subscript (tuple index)");
    parts[colons] = parse_expression(true);
  }
  ++p_;
  if (colons == 0) {
    if (!parts[0]) error(tok, "empty subscript");
    auto e = make_expr(Expr::Kind::kItem, tok);
    e->a = std::move(obj);
    e->b = std::move(parts[0]);
    return e;
  }
  auto e = make_expr(Expr::Kind::kSlice, tok);
  e->a = std::move(obj);
  for (auto& part : parts) e->args.push_back(std::move(part));
  return e;
}

void Parser::parse_call_args(Expr& e) {
  expect_op("(");
  while (!is_op(")")) {
    if (!e.args.empty() || !e.kwargs.empty()) {
      expect_op(",");
      if (is_op(")")) break;
    }
    if (is_op("*") || is_op("**"))
      error(cur(), "unsupported construct '*args'/'**kwargs' in a call");
    if (cur().type == TokType::kName && t_[p_ + 1].type == TokType::kOp && t_[p_ + 1].text == "=") {
      std::string name = cur().text;
      p_ += 2;
      e.kwargs.emplace_back(std::move(name), parse_expression(true));
    } else {
      if (!e.kwargs.empty()) error(cur(), "positional argument after a keyword argument");
      e.args.push_back(parse_expression(true));
    }
  }
  ++p_;
}

ExprPtr Parser::parse_call(ExprPtr callee) {
  auto e = make_expr(Expr::Kind::kCall, cur());
  e->a = std::move(callee);
  parse_call_args(*e);
  return e;
}

ExprPtr Parser::parse_filter_expr(ExprPtr e) {
  while (true) {
    if (is_op("|")) {
      std::vector<ExprPtr> chain;
      parse_filter_chain(chain);
      for (auto& f : chain) {
        f->a = std::move(e);
        e = std::move(f);
      }
    } else if (is_name("is")) {
      e = parse_test(std::move(e));
    } else if (is_op("(")) {
      e = parse_call(std::move(e));
    } else {
      return e;
    }
  }
}

// `| f1(args) | f2 ...`; each filter's input (a) is left for the caller to fill in.
void Parser::parse_filter_chain(std::vector<ExprPtr>& chain, bool first_pipe) {
  bool need_pipe = first_pipe;
  while (!need_pipe || is_op("|")) {
    if (need_pipe) ++p_;
    need_pipe = true;
    const Token& n = cur();
    if (n.type != TokType::kName) error(n, "expected a filter name after '|'");
    ++p_;
    if (!has_filter(n.text)) error(n, "unsupported filter '" + n.text + "'");
    auto f = make_expr(Expr::Kind::kFilter, n);
    f->name = n.text;
    if (is_op("(")) parse_call_args(*f);
    chain.push_back(std::move(f));
  }
}

ExprPtr Parser::parse_test(ExprPtr e) {
  const Token& tok = cur();
  ++p_;
  auto t = make_expr(Expr::Kind::kTest, tok);
  if (is_name("not")) {
    ++p_;
    t->negated = true;
  }
  const Token& n = cur();
  if (n.type != TokType::kName) error(n, "expected a test name after 'is'");
  t->name = n.text;
  ++p_;
  if (!has_test(t->name)) error(n, "unsupported test '" + t->name + "'");
  t->a = std::move(e);
  const Token& next = cur();
  if (is_op("(")) {
    parse_call_args(*t);
  } else if ((next.type == TokType::kName || next.type == TokType::kString ||
              next.type == TokType::kInt || next.type == TokType::kFloat || is_op("[") ||
              is_op("{")) &&
             !is_name("else") && !is_name("or") && !is_name("and") && !is_name("if") &&
             !is_name("is")) {
    // jinja2 takes one bare argument: `x is divisibleby 3`, `x is sameas none`.
    t->args.push_back(parse_postfix(parse_primary()));
  }
  return t;
}

}  // namespace lite_llama::jinja
