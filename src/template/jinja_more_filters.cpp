// jinja2 filters that chat templates use less often: groupby, batch, slice, truncate.
#include <algorithm>

#include "core/error.h"
#include "template/jinja_builtins.h"

namespace lite_llama::jinja {

// groupby(attribute, default=None, case_sensitive=False): sorted by the key, then grouped; each
// group is a (grouper, list) tuple whose fields are also attributes. Without case_sensitive the
// groups form on the lowered key, and the grouper is the first item's own key.
Value groupby_filter(const Value& v, CallArgs& a) {
  const Value* attr = find_arg(a, 0, "attribute");
  if (!attr) fail("groupby() missing required argument 'attribute'");
  Value dflt = arg_or(a, 1, "default", Value::none());
  bool cs = truthy(arg_or(a, 2, "case_sensitive", Value::boolean(false)));
  auto key_of = [&](const Value& item, bool fold) {
    Value k = lookup_path(item, *attr);
    if (k.is_undefined() && !dflt.is_none()) k = dflt;
    return fold && k.is_string() ? Value::string(py_lower(k.s)) : k;
  };
  std::vector<Value> items = iterate(v), keys;
  for (const Value& item : items) keys.push_back(key_of(item, !cs));
  std::vector<size_t> order(items.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return compare(keys[x], keys[y]) < 0; });
  ValueList out;
  for (size_t k = 0; k < order.size();) {
    ValueList members;
    size_t e = k;
    for (; e < order.size() && equals(keys[order[e]], keys[order[k]]); ++e)
      members.push_back(items[order[e]]);
    Value group = Value::make_tuple({key_of(items[order[k]], false), Value::make_list(std::move(members))});
    group.is_group = true;
    out.push_back(std::move(group));
    k = e;
  }
  return Value::make_list(std::move(out));
}

// batch(linecount, fill_with=None): lists of linecount items, the last one filled.
Value batch_filter(const Value& v, CallArgs& a) {
  Value count = arg_or(a, 0, "linecount", Value::none());
  if (!count.is_integral()) fail("batch: linecount must be an integer, not {}", type_name(count));
  const int64_t n = count.as_int();
  Value fill = arg_or(a, 1, "fill_with", Value::none());
  ValueList out, cur;
  for (Value& item : iterate(v)) {
    if (static_cast<int64_t>(cur.size()) == n) out.push_back(Value::make_list(std::move(cur))), cur.clear();
    cur.push_back(std::move(item));
  }
  if (!cur.empty()) {
    if (!fill.is_none())
      while (static_cast<int64_t>(cur.size()) < n) cur.push_back(fill);
    out.push_back(Value::make_list(std::move(cur)));
  }
  return Value::make_list(std::move(out));
}

// slice(slices, fill_with=None): `slices` columns, the first ones one item longer; the shorter
// ones get fill_with.
Value slice_filter(const Value& v, CallArgs& a) {
  Value count = arg_or(a, 0, "slices", Value::none());
  if (!count.is_integral()) fail("slice: slices must be an integer, not {}", type_name(count));
  const int64_t slices = count.as_int();
  if (slices == 0) fail("integer division or modulo by zero");
  Value fill = arg_or(a, 1, "fill_with", Value::none());
  std::vector<Value> seq = iterate(v);
  const int64_t len = static_cast<int64_t>(seq.size());
  // Python's floor division and modulo: a negative count gives no slices.
  int64_t per = len / slices - (len % slices != 0 && (len < 0) != (slices < 0));
  int64_t extra = len - per * slices;
  ValueList out;
  int64_t offset = 0;
  for (int64_t k = 0; k < slices; ++k) {
    int64_t start = offset + k * per;
    if (k < extra) ++offset;
    int64_t end = offset + (k + 1) * per;
    start = std::clamp<int64_t>(start, 0, len);
    end = std::clamp<int64_t>(end, start, len);
    ValueList part(seq.begin() + start, seq.begin() + end);
    if (!fill.is_none() && k >= extra) part.push_back(fill);
    out.push_back(Value::make_list(std::move(part)));
  }
  return Value::make_list(std::move(out));
}

// truncate(length=255, killwords=False, end='...', leeway=5), counting characters.
Value truncate_filter(const Value& v, CallArgs& a) {
  if (v.is_undefined()) return v;
  if (!v.is_string()) fail("object of type '{}' has no len()", type_name(v));
  Value length_v = arg_or(a, 0, "length", Value::integer(255));
  Value leeway_v = arg_or(a, 3, "leeway", Value::integer(5));
  if (!length_v.is_integral() || !leeway_v.is_integral()) fail("truncate: length and leeway must be integers");
  const bool killwords = truthy(arg_or(a, 1, "killwords", Value::boolean(false)));
  const std::u32string end = utf8_decode(to_str(arg_or(a, 2, "end", Value::string("..."))));
  const int64_t length = length_v.as_int(), leeway = leeway_v.as_int();
  if (length < static_cast<int64_t>(end.size()))
    fail("expected length >= {}, got {}", end.size(), length);
  if (leeway < 0) fail("expected leeway >= 0, got {}", leeway);
  std::u32string s = utf8_decode(v.s);
  if (static_cast<int64_t>(s.size()) <= length + leeway) return v;
  std::u32string head = s.substr(0, static_cast<size_t>(length) - end.size());
  if (!killwords) {
    size_t space = head.rfind(U' ');  // rsplit(" ", 1)[0]
    if (space != std::u32string::npos) head.resize(space);
  }
  return Value::string(utf8_encode(head + end));
}

}  // namespace lite_llama::jinja
