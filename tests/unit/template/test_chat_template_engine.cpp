// Unit tests of the Jinja-subset engine itself: errors (unsupported syntax, unclosed blocks,
// raise_exception, type errors), plus behaviours the golden cases do not reach. Semantics of
// printing, operators and filters are checked against jinja2 in the "engine/" golden cases.
#include <gtest/gtest.h>

#include "core/error.h"
#include "template/chat_template.h"

using namespace lite_llama;
using nlohmann::ordered_json;

namespace {

std::string render(const std::string& src, const ordered_json& ctx = ordered_json::object()) {
  return ChatTemplate(src).render(ctx);
}

// The message of the lite_llama::Error thrown by fn, or "" when nothing was thrown.
template <typename F>
std::string error_of(F&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string parse_error(const std::string& src) {
  return error_of([&] { ChatTemplate t(src); });
}

std::string render_error(const std::string& src, const ordered_json& ctx = ordered_json::object()) {
  return error_of([&] { render(src, ctx); });
}

TEST(ChatTemplateEngine, PlainTextAndVariables) {
  EXPECT_EQ(render("hello"), "hello");
  EXPECT_EQ(render(""), "");
  EXPECT_EQ(render("{{ name }}!", {{"name", "Ann"}}), "Ann!");
  EXPECT_EQ(render("{{ a.b.c }}", {{"a", {{"b", {{"c", 7}}}}}}), "7");
}

TEST(ChatTemplateEngine, WhitespaceControl) {
  // trim_blocks: the newline after a block tag goes; lstrip_blocks: its indentation too.
  EXPECT_EQ(render("{% if true %}\nx\n{% endif %}\ny"), "x\ny");
  EXPECT_EQ(render("  {% if true %}x{% endif %}"), "x");
  EXPECT_EQ(render("a {% if true %}x{% endif %}"), "a x");  // not at line start: kept
  EXPECT_EQ(render("a\n  {{ 'v' }}"), "a\n  v");            // variables are not lstripped
  EXPECT_EQ(render("a  \n {{- 'b' -}} \n c"), "abc");
  EXPECT_EQ(render("a\n  {%- if true -%}\n  b  {%- endif %}"), "ab");
  EXPECT_EQ(render("  {%+ if true %}x{% endif +%}\ny"), "  x\ny");
  EXPECT_EQ(render("a\n  {# note #}\nb"), "a\nb");
  EXPECT_EQ(render("x\n"), "x");  // one trailing newline is dropped, as jinja2 does
  EXPECT_EQ(render("x\n\n"), "x\n");
  EXPECT_EQ(render("{% raw %}{{ x }}{% endraw %}"), "{{ x }}");
}

TEST(ChatTemplateEngine, NamespaceCarriesStateOutOfLoops) {
  const char* src =
      "{% set ns = namespace(last=-1) %}{% for m in messages %}{% if m.role == 'user' %}"
      "{% set ns.last = loop.index0 %}{% endif %}{% endfor %}{{ ns.last }}";
  ordered_json ctx = {
      {"messages", {{{"role", "user"}}, {{"role", "assistant"}}, {{"role", "user"}}}}};
  EXPECT_EQ(render(src, ctx), "2");
}

TEST(ChatTemplateEngine, DictOrderIsKept) {
  ordered_json ctx = {{"d", {{"z", 1}, {"a", 2}}}};
  EXPECT_EQ(render("{{ d | tojson }}", ctx), "{\"z\": 1, \"a\": 2}");
  EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}{% endfor %}", ctx), "za");
}

// As jinja2's default Undefined (which HF's templates render with): an undefined name prints as
// nothing and is falsy, but an attribute or item of it is an error.
TEST(ChatTemplateEngine, UndefinedIsEmptyAndFalsy) {
  EXPECT_EQ(render("[{{ nope }}]"), "[]");
  for (const char* t : {"{{ nope.deeper }}", "{{ nope['x'] }}", "{{ nope.x is defined }}", "{{ m.missing.x }}",
                        "{{ nope[1:2] }}", "{{ m.missing[::-1] }}"})
    EXPECT_NE(render_error(t, {{"m", {{"role", "user"}}}}).find("is undefined"), std::string::npos) << t;
  EXPECT_EQ(render("{% if nope %}y{% else %}n{% endif %}{% if nope is undefined %}u{% endif %}"),
            "nu");
  EXPECT_EQ(render("{{ m.missing is defined }}", {{"m", {{"role", "user"}}}}), "False");
  // Slices as jinja2 3.1 renders them: an undefined bound fails, a value that cannot be sliced or
  // a bound of another type gives an undefined value (printed as nothing).
  for (const char* t : {"{{ 'abc'[nope:] }}", "{{ 'abc'[1:nope] }}", "{{ 'abc'[::nope] }}"})
    EXPECT_NE(render_error(t).find("slice indices must be integers or None"), std::string::npos) << t;
  EXPECT_EQ(render("[{{ none[1:2] }}][{{ 5[1:2] }}][{{ {'a': 1}[1:2] }}][{{ 'abc'['a':] }}][{{ 'abc'[1.0:] }}]"),
            "[][][][][]");
  EXPECT_EQ(render("{{ 'abcd'[1:3] }}{{ [1, 2, 3][::-1] }}"), "bc[3, 2, 1]");
}

TEST(ChatTemplateEngine, UnsupportedTagNamesConstructAndPosition) {
  std::string e = parse_error("line one\n  {% extends 'base.html' %}");
  EXPECT_NE(e.find("extends"), std::string::npos) << e;
  EXPECT_NE(e.find("line 2"), std::string::npos) << e;
  EXPECT_NE(e.find("column"), std::string::npos) << e;
  EXPECT_NE(parse_error("{% include 'x' %}").find("include"), std::string::npos);
  EXPECT_NE(parse_error("{% frobnicate %}").find("frobnicate"), std::string::npos);
  EXPECT_NE(parse_error("{{ x | no_such_filter }}").find("no_such_filter"), std::string::npos);
  EXPECT_NE(parse_error("{{ x is no_such_test }}").find("no_such_test"), std::string::npos);
  EXPECT_NE(parse_error("{% call x | upper %}{% endcall %}").find("expected a call"), std::string::npos);
}

TEST(ChatTemplateEngine, UnclosedBlocksAndTagsFail) {
  std::string e = parse_error("{% for m in messages %}\n{{ m }}");
  EXPECT_NE(e.find("unclosed 'for'"), std::string::npos) << e;
  EXPECT_NE(e.find("line 1"), std::string::npos) << e;
  EXPECT_NE(parse_error("{% if x %}a{% else %}b").find("unclosed 'if'"), std::string::npos);
  EXPECT_NE(parse_error("{% macro f() %}x").find("unclosed 'macro'"), std::string::npos);
  EXPECT_NE(parse_error("{{ x ").find("unclosed '{{'"), std::string::npos);
  EXPECT_NE(parse_error("{# x ").find("comment"), std::string::npos);
  EXPECT_NE(parse_error("{% endif %}").find("endif"), std::string::npos);
  EXPECT_NE(parse_error("{% if x %}{% endfor %}").find("endfor"), std::string::npos);
  EXPECT_NE(parse_error("{{ 'abc }}").find("unterminated string"), std::string::npos);
  EXPECT_NE(parse_error("{{ (1 }}").find("line 1"), std::string::npos);
  EXPECT_NE(parse_error("{% break %}").find("outside of a for loop"), std::string::npos);
}

TEST(ChatTemplateEngine, RaiseExceptionMessageSurfaces) {
  std::string e = render_error("ok\n{{ raise_exception('Conversation roles must alternate!') }}");
  EXPECT_NE(e.find("Conversation roles must alternate!"), std::string::npos) << e;
  EXPECT_NE(e.find("line 2"), std::string::npos) << e;
}

TEST(ChatTemplateEngine, TypeErrorsFailWithLine) {
  std::string e = render_error("\n\n{{ 'a' + 1 }}");
  EXPECT_NE(e.find("line 3"), std::string::npos) << e;
  EXPECT_NE(e.find("concatenate"), std::string::npos) << e;
  EXPECT_NE(render_error("{{ 1 / 0 }}").find("division by zero"), std::string::npos);
  EXPECT_NE(render_error("{{ nope + 1 }}").find("'nope' is undefined"), std::string::npos);
  EXPECT_NE(render_error("{{ nope() }}").find("'nope' is undefined"), std::string::npos);
  EXPECT_NE(render_error("{{ 3 | length }}").find("has no len()"), std::string::npos);
  EXPECT_NE(render_error("{{ 'x' in none }}").find("not iterable"), std::string::npos);
  EXPECT_NE(render_error("{{ 1 < 'a' }}").find("not supported"), std::string::npos);
  EXPECT_NE(render_error("{% set x = 1 %}{% set x.a = 2 %}").find("namespace"), std::string::npos);
  EXPECT_NE(render_error("{{ l.append(1) }}", {{"l", {1}}}).find("immutable"), std::string::npos);
  EXPECT_EQ(render_error("{{ x | tojson }}", {{"x", nullptr}}), "");  // null is fine
  EXPECT_NE(render_error("{{ nope | tojson }}").find("not JSON serializable"), std::string::npos);
}

TEST(ChatTemplateEngine, HostileTemplatesFailCleanly) {
  // Limits that stand in for Python's own (recursion depth, big integers, memory).
  EXPECT_NE(render_error("{% macro f(x) %}{{ f(x) }}{% endmacro %}{{ f(1) }}").find("recursion"),
            std::string::npos);
  EXPECT_NE(parse_error("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}")
                .find("nesting is too deep"),
            std::string::npos);
  std::string nested_ifs;
  for (int k = 0; k < 3000; ++k) nested_ifs += "{% if x %}";
  EXPECT_NE(parse_error(nested_ifs).find("nesting is too deep"), std::string::npos);
  // Ints past 64 bits are exact (engine/big_integers checks values against jinja2); results too
  // big to print, or too big to hold, fail instead of running away.
  EXPECT_EQ(render("{{ 3 ** 100 }}"), "515377520732011331036461129765621272702107522001");
  EXPECT_EQ(render("{{ (-1) ** 1000000000000 }} {{ 2 ** 62 }}"), "1 4611686018427387904");
  EXPECT_NE(render_error("{{ 10 ** 5000 }}").find("4300 digits"), std::string::npos);
  EXPECT_NE(render_error("{{ 2 ** 1000000000000 }}").find("too large"), std::string::npos);
  EXPECT_NE(render_error("{{ 10 ** 400 / 3 }}").find("too large to convert to float"), std::string::npos);
  EXPECT_NE(render_error("{{ 'ab' * 2 ** 70 }}").find("beyond 64 bits"), std::string::npos);
  EXPECT_NE(render_error("{{ [1][2 ** 70] }}").find("beyond 64 bits"), std::string::npos);
  // An attribute path's part of digits past 64 bits is a missing item, as any other int jinja2
  // cannot find (it threw std::out_of_range from std::stoll).
  EXPECT_EQ(render("{{ [{'a': 1}]|map(attribute='99999999999999999999')|list|length }}"), "1");
  EXPECT_EQ(render("{{ [{'a': 1}]|map(attribute='a.99999999999999999999')|first is undefined }}"), "True");
  EXPECT_EQ(render("{{ [{'a': 1}]|map(attribute='7')|first is undefined }}"), "True");
  // str.format: a field of digits past size_t has no argument (std::stoul threw out_of_range);
  // digits then letters name a keyword, as in Python, not positional argument 0.
  EXPECT_NE(render_error("{{ '{99999999999999999999999}'.format(1) }}").find("no argument"), std::string::npos);
  EXPECT_NE(render_error("{{ '{0abc}'.format(1) }}").find("no argument"), std::string::npos);
  EXPECT_EQ(render("{{ '{1}{0}'.format('a', 'b') }}"), "ba");
  EXPECT_NE(render_error("{{ 'ab' * 1000000000000 }}").find("too large"), std::string::npos);
  EXPECT_NE(render_error("{{ range(1000000) | length }}").find("range too big"), std::string::npos);
  // Work and size over the whole rendering: nested loops, and strings or lists doubled in a loop.
  EXPECT_NE(render_error("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}")
                .find("steps"),
            std::string::npos);
  EXPECT_NE(render_error("{% set s = namespace(v='x') %}{% for i in range(64) %}{% set s.v = s.v ~ s.v %}{% endfor %}")
                .find("larger than the renderer allows"),
            std::string::npos);
  EXPECT_NE(render_error("{% set s = namespace(v=[1]) %}{% for i in range(64) %}{% set s.v = s.v + s.v %}{% endfor %}")
                .find("larger than the renderer allows"),
            std::string::npos);
  EXPECT_NE(render_error("{% for i in range(100000) %}{{ 'hello world ' * 100 }}{% endfor %}").find("rendered text"),
            std::string::npos);
  EXPECT_EQ(render("{% for i in range(1000) %}{% for j in range(100) %}{% endfor %}{% endfor %}ok"), "ok");
  ordered_json deep = 1;
  for (int k = 0; k < 1000; ++k) deep = ordered_json::array({deep});
  EXPECT_NE(render_error("{{ x }}", {{"x", deep}}).find("nested deeper"), std::string::npos);
}

TEST(ChatTemplateEngine, MacrosAndCalls) {
  EXPECT_EQ(render("{% macro f(a, b=2) %}{{ a * b }}{% endmacro %}{{ f(3) }},{{ f(3, b=4) }}"),
            "6,12");
  EXPECT_NE(render_error("{% macro f(a) %}{% endmacro %}{{ f(1, 2) }}").find("not more than 1"),
            std::string::npos);
  EXPECT_NE(
      render_error("{% macro f(a) %}{% endmacro %}{{ f(z=1) }}").find("no keyword argument 'z'"),
      std::string::npos);
  EXPECT_NE(render_error("{{ 'abc'() }}").find("not callable"), std::string::npos);
}

// Where jinja2 raises on recursive loops, call blocks and macro arguments, the engine fails too.
TEST(ChatTemplateEngine, LoopsCallBlocksAndMacroArgumentsFail) {
  EXPECT_NE(render_error("{% for x in [1] %}{{ loop([2]) }}{% endfor %}").find("'recursive' marker"),
            std::string::npos);
  EXPECT_NE(render_error("{% for x in [1] recursive %}{{ loop() }}{% endfor %}").find("exactly one"),
            std::string::npos);
  EXPECT_NE(render_error("{% for x in [1] recursive %}{{ loop([1]) }}{% endfor %}").find("recursion"),
            std::string::npos);
  EXPECT_NE(render_error("{% macro m() %}x{% endmacro %}{% call m() %}y{% endcall %}")
                .find("two values for the special caller argument"),
            std::string::npos);
  EXPECT_NE(render_error("{% macro m() %}{{ caller() }}{% endmacro %}{{ m() }}").find("'caller' is undefined"),
            std::string::npos);
  EXPECT_NE(render_error("{% macro m(a) %}{% endmacro %}{{ m(1, a=2) }}").find("no keyword argument 'a'"),
            std::string::npos);
  EXPECT_NE(render_error("{% macro m() %}{{ caller(1) }}{% endmacro %}{% call m() %}{% endcall %}")
                .find("macro 'caller' takes not more than 0"),
            std::string::npos);
  EXPECT_NE(parse_error("{% macro m(caller) %}{{ caller() }}{% endmacro %}").find("special 'caller'"),
            std::string::npos);
  EXPECT_NE(parse_error("{% macro m(a=1, b) %}{% endmacro %}").find("non-default argument"),
            std::string::npos);
  EXPECT_NE(parse_error("{% call m() %}x").find("unclosed 'call'"), std::string::npos);
  // A loop object kept past its loop cannot run it again.
  EXPECT_NE(render_error("{% set ns = namespace() %}{% for x in [1] recursive %}{% set ns.l = loop %}"
                         "{% endfor %}{{ ns.l([2]) }}")
                .find("after its loop has ended"),
            std::string::npos);
}

TEST(ChatTemplateEngine, FormatSpecErrorsAsPython) {
  const std::pair<const char*, const char*> cases[] = {
      {"{{ '{:d}'.format('a') }}", "Unknown format code 'd' for object of type 'str'"},
      {"{{ '{:.2f}'.format('a') }}", "Unknown format code 'f' for object of type 'str'"},
      {"{{ '{:d}'.format(1.5) }}", "Unknown format code 'd' for object of type 'float'"},
      {"{{ '{:s}'.format(1) }}", "Unknown format code 's' for object of type 'int'"},
      {"{{ '{:.2d}'.format(1) }}", "Precision not allowed in integer format specifier"},
      {"{{ '{:+s}'.format('a') }}", "Sign not allowed in string format specifier"},
      {"{{ '{:,x}'.format(1) }}", "Cannot specify ',' with 'x'."},
      {"{{ '{:>5}'.format(none) }}", "unsupported format string passed to NoneType.__format__"},
      {"{{ '{:>5}'.format([1]) }}", "unsupported format string passed to list.__format__"},
      {"{{ '{!q}'.format(1) }}", "Unknown conversion specifier q"},
      {"{{ '{:5'.format(1) }}", "unmatched '{' in format spec"},
      {"{{ '{0'.format(1) }}", "expected '}' before end of string"},
      {"{{ '{x}'.format(1) }}", "no argument for field '{x}'"},
      {"{{ '{1}'.format(1) }}", "no argument for field '{1}'"},
      {"{{ '{:.}'.format(1.5) }}", "Format specifier missing precision"},
      {"{{ '{:,_}'.format(1) }}", "Cannot specify both ',' and '_'."},
      {"{{ '{:99999999999}'.format(1) }}", "too big"},
  };
  for (const auto& [tpl, msg] : cases) EXPECT_NE(render_error(tpl).find(msg), std::string::npos) << tpl << " -> " << render_error(tpl);
  EXPECT_EQ(render("{{ '{:>{w}.{p}f}|'.format(3.14159, w=8, p=2) }}"), "    3.14|");
}

TEST(ChatTemplateEngine, StrftimeNowFormatsLocalTime) {
  std::string year = render("{{ strftime_now('%Y') }}");
  ASSERT_EQ(year.size(), 4u);
  EXPECT_TRUE(std::all_of(year.begin(), year.end(), ::isdigit));
  EXPECT_EQ(render("{{ strftime_now is defined }}"), "True");
}

TEST(ChatTemplateEngine, ContextFromUnorderedJson) {
  nlohmann::json ctx = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  EXPECT_EQ(
      ChatTemplate("{% for m in messages %}{{ m.role }}:{{ m.content }}{% endfor %}").render(ctx),
      "user:hi");
}

TEST(ChatTemplateEngine, TemplateIsReusable) {
  ChatTemplate t("{{ x }}");
  EXPECT_EQ(t.render(ordered_json{{"x", 1}}), "1");
  EXPECT_EQ(t.render(ordered_json{{"x", "two"}}), "two");
  ChatTemplate moved = std::move(t);
  EXPECT_EQ(moved.render(ordered_json{{"x", 3.5}}), "3.5");
}

}  // namespace

TEST(ChatTemplateEngine, StripDecodesOnlyTheEnds) {
  // U+3000 and U+00A0 are whitespace to Python; U+00E9 is not.
  const ordered_json ctx = {{"s", " \t\xE3\x80\x80\xC3\xA9 a\xC2\xA0" "b \xC2\xA0\n"}, {"w", " \xE3\x80\x80 "}};
  EXPECT_EQ(render("[{{ s | trim }}]", ctx), "[\xC3\xA9 a\xC2\xA0" "b]");
  EXPECT_EQ(render("[{{ s.lstrip() }}]", ctx), "[\xC3\xA9 a\xC2\xA0" "b \xC2\xA0\n]");
  EXPECT_EQ(render("[{{ s.rstrip() }}]", ctx), "[ \t\xE3\x80\x80\xC3\xA9 a\xC2\xA0" "b]");
  EXPECT_EQ(render("[{{ s.strip(' \t\xE3\x80\x80\n') }}]", ctx), "[\xC3\xA9 a\xC2\xA0" "b \xC2\xA0]");
  EXPECT_EQ(render("[{{ w | trim }}][{{ w.rstrip() }}]", ctx), "[][]");
  EXPECT_EQ(render("[{{ '' | trim }}]"), "[]");
}

// Expected values are jinja2 3.1's (ImmutableSandboxedEnvironment) on the same templates.
TEST(ChatTemplateEngine, SortKeysCompareAsJinja2Lists) {
  const ordered_json xs = {{"xs", {{{"a", 2}}, {{"a", 1}}, {{"a", 3}}}}};
  // Every key missing: undefined equals undefined, so the order is kept (forward and reverse).
  EXPECT_EQ(render("{{ xs|sort(attribute='k')|map(attribute='a')|join(',') }}", xs), "2,1,3");
  EXPECT_EQ(render("{{ xs|sort(attribute='k', reverse=true)|map(attribute='a')|join(',') }}", xs), "2,1,3");
  // "k,a": by k (all missing, equal), then by a.
  EXPECT_EQ(render("{{ xs|sort(attribute='k,a')|map(attribute='a')|join(',') }}", xs), "1,2,3");
  const ordered_json people = {{"p", {{{"n", "b"}, {"age", 2}}, {{"n", "a"}, {"age", 2}}, {{"n", "c"}, {"age", 1}}}}};
  EXPECT_EQ(render("{{ p|sort(attribute='age,n')|map(attribute='n')|join }}", people), "cab");
  EXPECT_EQ(render("{{ p|sort(attribute='age,n', reverse=true)|map(attribute='n')|join }}", people), "bac");
  EXPECT_EQ(render("{{ [none, none]|sort|list }}"), "[None, None]");
  // A missing key beside a present one cannot be ordered.
  EXPECT_FALSE(render_error("{{ xs|sort(attribute='k')|list }}", {{"xs", {{{"k", 1}}, {{"a", 1}}}}}).empty());
  EXPECT_FALSE(render_error("{{ [none, 1]|sort|list }}").empty());
}

TEST(ChatTemplateEngine, FormatRefusesWhatPythonRefuses) {
  EXPECT_NE(render_error("{{ '{0}{}'.format(1, 2) }}").find("cannot switch from manual field specification"),
            std::string::npos);
  EXPECT_NE(render_error("{{ '{}{1}'.format(1, 2) }}").find("cannot switch from automatic field numbering"),
            std::string::npos);
  EXPECT_NE(render_error("{{ 'a}b'.format(1) }}").find("single '}' encountered"), std::string::npos);
  EXPECT_EQ(render("{{ '{a}{}{}'.format(1, 2, a=3) }}"), "312");
  EXPECT_EQ(render("{{ '{{}}{}}}'.format(1) }}"), "{}1}");
}

// Expected values are jinja2 3.1's and Python 3.11's on the same templates.
TEST(ChatTemplateEngine, UnicodeDigitsAsPythonReadsThem) {
  const ordered_json xs = {{"xs", {{{"a", {5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17}}}}}};
  EXPECT_EQ(render("{{ xs|map(attribute='a.\u0661')|list }}", xs), "[6]");         // ARABIC-INDIC ONE
  EXPECT_EQ(render("{{ xs|map(attribute='a.\u0661\u0662')|list }}", xs), "[17]");  // twelve
  EXPECT_EQ(render("{{ xs|map(attribute='a.\uff13')|list }}", xs), "[8]");         // FULLWIDTH THREE
  // A digit int() does not take (superscript two): jinja2 raises ValueError.
  EXPECT_NE(render_error("{{ xs|map(attribute='a.\u00b2')|list }}", xs).find("invalid literal for int()"),
            std::string::npos);
  EXPECT_EQ(render("{{ '{\u0661}{\u0660}'.format('a', 'b') }}"), "ba");
  EXPECT_NE(render_error("{{ '{\u00b2}'.format(1) }}").find("no argument"), std::string::npos);  // a keyword
  EXPECT_EQ(render("{{ '\u0661\u0662'.isdigit() }} {{ '\u00b2'.isdigit() }} {{ '\u2460'.isdigit() }} "
                   "{{ '\u00bd'.isdigit() }} {{ 'x1'.isdigit() }} {{ ''.isdigit() }}"),
            "True True True False False False");
}
