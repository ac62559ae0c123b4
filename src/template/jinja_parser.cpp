// Statement half of the chat template parser (see jinja_parser.h): text, {{ }} and the block
// tags. Tags outside the supported subset fail here, at construction, with line and column.
#include "template/jinja_parser.h"

#include "core/error.h"

namespace lite_llama::jinja {

// Parses statements until a block tag whose name is in `ends` (left unconsumed, its name
// stored in *end); at EOF with `ends` non-empty the caller reports the unclosed block.
Body Parser::subparse(const std::unordered_set<std::string>& ends, std::string* end) {
  Body body;
  while (true) {
    const Token& tok = cur();
    if (tok.type == TokType::kEof) {
      end->clear();
      return body;
    }
    if (tok.type == TokType::kText) {
      auto s = make_stmt(Stmt::Kind::kText, tok);
      s->text = tok.text;
      body.push_back(std::move(s));
      ++p_;
    } else if (tok.type == TokType::kVarBegin) {
      ++p_;
      auto s = make_stmt(Stmt::Kind::kOutput, tok);
      s->expr = parse_tuple(true);
      expect(TokType::kVarEnd, "'}}'");
      body.push_back(std::move(s));
    } else if (tok.type == TokType::kBlockBegin) {
      const Token& name = t_[p_ + 1];
      if (name.type == TokType::kName && ends.count(name.text)) {
        ++p_;
        *end = name.text;
        return body;
      }
      ++p_;
      body.push_back(parse_statement());
    } else {
      error(tok, "unexpected token");
    }
  }
}

// Parses a nested body up to one of `ends`; errors if the template ends first.
Body Parser::body_until(const Token& open, const std::string& tag,
                        const std::unordered_set<std::string>& ends, std::string* end) {
  Body body = subparse(ends, end);
  if (end->empty())
    error(open, "unclosed '" + tag + "' block: reached the end of the template without '{% end" +
                    tag + " %}'");
  ++p_;  // the end tag's name
  return body;
}

StmtPtr Parser::parse_statement() {
  const Token& tok = cur();
  NestingGuard guard(*this, tok);
  if (tok.type != TokType::kName) error(tok, "expected a tag name after '{%'");
  const std::string& n = tok.text;
  ++p_;
  if (n == "if") return parse_if(tok);
  if (n == "for") return parse_for(tok);
  if (n == "set") return parse_set(tok);
  if (n == "macro") return parse_macro(tok);
  if (n == "call") return parse_call_block(tok);
  if (n == "break" || n == "continue") {
    if (loop_depth_ == 0) error(tok, "'" + n + "' outside of a for loop");
    auto s = make_stmt(n == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue, tok);
    expect(TokType::kBlockEnd, "'%}'");
    return s;
  }
  if (n == "print") {
    auto s = make_stmt(Stmt::Kind::kOutput, tok);
    s->expr = parse_tuple(true);
    expect(TokType::kBlockEnd, "'%}'");
    return s;
  }
  if (n == "filter") return parse_filter_block(tok);
  if (n == "with") return parse_with(tok);
  if (n == "generation") {  // transformers' assistant-mask extension: renders its body as is
    auto s = make_stmt(Stmt::Kind::kPlain, tok);
    expect(TokType::kBlockEnd, "'%}'");
    std::string end;
    s->body = body_until(tok, "generation", {"endgeneration"}, &end);
    expect(TokType::kBlockEnd, "'%}'");
    return s;
  }
  static const std::unordered_set<std::string> kUnsupported = {
      "extends", "block", "include", "import", "from", "autoescape", "do", "trans", "pluralize"};
  if (kUnsupported.count(n)) error(tok, "unsupported tag '" + n + "'");
  if (n.rfind("end", 0) == 0 || n == "else" || n == "elif")
    error(tok, "unexpected '" + n + "' tag with no open block it could close");
  error(tok, "unknown tag '" + n + "'");
}

StmtPtr Parser::parse_if(const Token& open) {
  auto s = make_stmt(Stmt::Kind::kIf, open);
  ExprPtr cond = parse_tuple(true);
  while (true) {
    expect(TokType::kBlockEnd, "'%}'");
    std::string end;
    Body body = body_until(open, "if", {"elif", "else", "endif"}, &end);
    s->branches.emplace_back(std::move(cond), std::move(body));
    if (end == "elif") {
      cond = parse_tuple(true);
      continue;
    }
    if (end == "else") {
      expect(TokType::kBlockEnd, "'%}'");
      s->else_body = body_until(open, "if", {"endif"}, &end);
    }
    expect(TokType::kBlockEnd, "'%}'");
    return s;
  }
}

StmtPtr Parser::parse_for(const Token& open) {
  auto s = make_stmt(Stmt::Kind::kFor, open);
  s->targets = parse_targets();
  expect_name("in");
  s->expr = parse_tuple(false, /*stop_at_if=*/true);
  if (is_name("if")) {
    ++p_;
    s->cond = parse_expression(true);
  }
  if (is_name("recursive")) {
    s->recursive = true;
    ++p_;
  }
  expect(TokType::kBlockEnd, "'%}'");
  std::string end;
  ++loop_depth_;
  s->body = body_until(open, "for", {"else", "endfor"}, &end);
  --loop_depth_;
  if (end == "else") {
    expect(TokType::kBlockEnd, "'%}'");
    s->else_body = body_until(open, "for", {"endfor"}, &end);
  }
  expect(TokType::kBlockEnd, "'%}'");
  return s;
}

std::vector<std::string> Parser::parse_targets() {
  std::vector<std::string> names;
  bool paren = is_op("(");
  if (paren) ++p_;
  while (true) {
    const Token& n = cur();
    if (n.type != TokType::kName) error(n, "expected a variable name");
    names.push_back(n.text);
    ++p_;
    if (!is_op(",")) break;
    ++p_;
  }
  if (paren) expect_op(")");
  return names;
}

StmtPtr Parser::parse_set(const Token& open) {
  const Token& first = cur();
  if (first.type == TokType::kName && t_[p_ + 1].type == TokType::kOp && t_[p_ + 1].text == ".") {
    auto s = make_stmt(Stmt::Kind::kSet, open);
    s->text = first.text;
    p_ += 2;
    if (cur().type != TokType::kName) error(cur(), "expected an attribute name");
    s->attr = cur().text;
    ++p_;
    expect_op("=");
    s->expr = parse_tuple(true);
    expect(TokType::kBlockEnd, "'%}'");
    return s;
  }
  std::vector<std::string> targets = parse_targets();
  if (is_op("=")) {
    ++p_;
    auto s = make_stmt(Stmt::Kind::kSet, open);
    s->targets = std::move(targets);
    s->expr = parse_tuple(true);
    expect(TokType::kBlockEnd, "'%}'");
    return s;
  }
  if (targets.size() != 1) error(open, "a block 'set' takes exactly one name");
  auto s = make_stmt(Stmt::Kind::kSetBlock, open);
  s->text = targets[0];
  if (is_op("|")) parse_filter_chain(s->filters);
  expect(TokType::kBlockEnd, "'%}'");
  std::string end;
  s->body = body_until(open, "set", {"endset"}, &end);
  expect(TokType::kBlockEnd, "'%}'");
  return s;
}

StmtPtr Parser::parse_macro(const Token& open) {
  auto s = make_stmt(Stmt::Kind::kMacro, open);
  if (cur().type != TokType::kName) error(cur(), "expected a macro name");
  s->text = cur().text;
  ++p_;
  if (!is_op("(")) error(cur(), "expected '('" + describe(cur()));
  parse_signature(*s);
  parse_macro_body(open, *s, "macro");
  if (cur().type == TokType::kName) ++p_;  // jinja2 allows {% endmacro name %}
  expect(TokType::kBlockEnd, "'%}'");
  return s;
}

// {% call m(args) %} passes its body to m as `caller`; {% call(x) m() %} gives caller params.
StmtPtr Parser::parse_call_block(const Token& open) {
  auto s = make_stmt(Stmt::Kind::kCallBlock, open);
  s->text = "caller";
  if (is_op("(")) parse_signature(*s);
  s->expr = parse_expression(true);
  if (s->expr->kind != Expr::Kind::kCall) error(open, "expected a call after 'call'");
  parse_macro_body(open, *s, "call");
  expect(TokType::kBlockEnd, "'%}'");
  return s;
}

void Parser::parse_signature(Stmt& s) {
  expect_op("(");
  while (!is_op(")")) {
    if (!s.params.empty()) expect_op(",");
    if (cur().type != TokType::kName) error(cur(), "expected a macro parameter name");
    std::string name = cur().text;
    ++p_;
    ExprPtr def;
    if (is_op("=")) {
      ++p_;
      def = parse_expression(true);
    } else if (!s.params.empty() && s.params.back().second) {
      error(cur(), "non-default argument follows default argument");
    }
    s.params.emplace_back(std::move(name), std::move(def));
  }
  ++p_;
}

namespace {

// jinja2's find_undeclared(body, ("caller", "kwargs", "varargs")): which of the names the body
// reads before any assignment to them (an assignment makes the name an ordinary variable).
struct SpecialNames {
  bool open[3] = {true, true, true};  // still looked for
  bool found[3] = {false, false, false};
  static int slot(const std::string& n) {
    return n == "caller" ? 0 : n == "varargs" ? 1 : n == "kwargs" ? 2 : -1;
  }
  void load(const std::string& n) {
    int k = slot(n);
    if (k >= 0 && open[k]) found[k] = true;
  }
  void store(const std::string& n) {
    int k = slot(n);
    if (k >= 0 && !found[k]) open[k] = false;
  }
  void expr(const Expr* e) {
    if (!e) return;
    if (e->kind == Expr::Kind::kName) load(e->name);
    expr(e->a.get());
    expr(e->b.get());
    expr(e->c.get());
    for (const auto& x : e->args) expr(x.get());
    for (const auto& kv : e->kwargs) expr(kv.second.get());
  }
  void body(const Body& b) {
    for (const auto& s : b) stmt(*s);
  }
  void stmt(const Stmt& s) {
    for (const auto& t : s.targets) store(t);
    if (s.kind == Stmt::Kind::kSet && !s.attr.empty()) load(s.text);
    if (s.kind == Stmt::Kind::kSetBlock) store(s.text);
    for (const auto& [name, e] : s.params) {
      if (s.kind == Stmt::Kind::kMacro || s.kind == Stmt::Kind::kCallBlock) store(name);
      expr(e.get());
    }
    if (s.kind == Stmt::Kind::kWith)
      for (const auto& p : s.params) store(p.first);
    expr(s.expr.get());
    expr(s.cond.get());
    for (const auto& [cond, b] : s.branches) {
      expr(cond.get());
      body(b);
    }
    for (const auto& f : s.filters) expr(f.get());
    body(s.body);
    body(s.else_body);
  }
};

}  // namespace

void Parser::parse_macro_body(const Token& open, Stmt& s, const char* tag) {
  expect(TokType::kBlockEnd, "'%}'");
  std::string end;
  int saved = loop_depth_;
  loop_depth_ = 0;
  s.body = body_until(open, tag, {std::string("end") + tag}, &end);
  loop_depth_ = saved;
  SpecialNames names;
  names.body(s.body);
  s.uses_caller = names.found[0];
  s.uses_varargs = names.found[1];
  s.uses_kwargs = names.found[2];
  for (size_t k = 0; k < s.params.size(); ++k) {
    const auto& [name, dflt] = s.params[k];
    if (name == "caller" && s.uses_caller && !dflt)
      error(open, "the special 'caller' parameter of a macro must be omitted or given a default");
    if (name == "caller") s.uses_caller = false;  // an ordinary parameter then
    if (name == "varargs") s.uses_varargs = false;  // an ordinary parameter then
    if (name == "kwargs") s.uses_kwargs = false;
  }
}

StmtPtr Parser::parse_filter_block(const Token& open) {
  auto s = make_stmt(Stmt::Kind::kFilterBlock, open);
  parse_filter_chain(s->filters, /*first_pipe=*/false);
  expect(TokType::kBlockEnd, "'%}'");
  std::string end;
  s->body = body_until(open, "filter", {"endfilter"}, &end);
  expect(TokType::kBlockEnd, "'%}'");
  return s;
}

StmtPtr Parser::parse_with(const Token& open) {
  auto s = make_stmt(Stmt::Kind::kWith, open);
  while (!is_block_end()) {
    if (!s->params.empty()) expect_op(",");
    if (cur().type != TokType::kName) error(cur(), "expected a variable name");
    std::string name = cur().text;
    ++p_;
    expect_op("=");
    s->params.emplace_back(std::move(name), parse_expression(true));
  }
  expect(TokType::kBlockEnd, "'%}'");
  std::string end;
  s->body = body_until(open, "with", {"endwith"}, &end);
  expect(TokType::kBlockEnd, "'%}'");
  return s;
}

Body parse_template(std::string_view source) { return Parser(tokenize(source)).parse_all(); }

}  // namespace lite_llama::jinja
