// Attribute/item access, slicing, iteration and the globals of transformers' environment
// (raise_exception, strftime_now, namespace, dict, range). Access follows jinja2's sandboxed
// getattr/getitem: `obj.name` prefers bound methods over dict keys, `obj[key]` the reverse.
#include <chrono>
#include <ctime>
#include <optional>

#include "core/error.h"
#include "template/jinja_builtins.h"

namespace lite_llama::jinja {

bool has_method(const Value& obj, const std::string& name) {
  static const char* kStr[] = {
      "strip",        "lstrip",  "rstrip",  "split",      "rsplit",  "startswith", "endswith",
      "lower",        "upper",   "title",   "capitalize", "replace", "find",       "rfind",
      "index",        "rindex",  "count",   "join",       "format",  "splitlines", "removeprefix",
      "removesuffix", "isspace", "isdigit", "isalpha",    "isalnum", "islower",    "isupper",
      "zfill",        "ljust",   "rjust",   "center",     "partition", "rpartition"};
  static const char* kDict[] = {"get", "keys", "values", "items"};
  static const char* kList[] = {"index", "count"};
  auto in = [&](auto& table) {
    for (const char* n : table)
      if (name == n) return true;
    return false;
  };
  if (obj.is_string()) return in(kStr);
  if (obj.is_dict()) return in(kDict);
  if (obj.is_list()) return in(kList);
  return false;
}

// Methods that mutate: the immutable sandbox refuses them. Only real methods of the type count,
// so a dict key named "sort" is still a key.
static bool is_mutator(const Value& obj, const std::string& name) {
  static const char* kList[] = {"append", "extend", "insert", "pop",
                                "remove", "clear",  "sort",   "reverse"};
  static const char* kDict[] = {"pop", "popitem", "clear", "update", "setdefault"};
  auto in = [&](auto& table) {
    for (const char* n : table)
      if (name == n) return true;
    return false;
  };
  return obj.is_list() ? in(kList) : obj.is_dict() ? in(kDict) : false;
}

Value get_attr(const Value& obj, const std::string& name) {
  // jinja2's default Undefined (HF's templates render with it) raises on any attribute: a typo
  // or a missing message must not render as an empty string.
  if (obj.is_undefined()) undefined_error(obj);
  if (obj.kind == Value::Kind::kNamespace) {
    const Value* v = obj.dict->find(name);
    return v ? *v : Value::undefined(name);
  }
  if (obj.kind == Value::Kind::kFunction && obj.dict) {  // a macro's attributes
    const Value* v = obj.dict->find(name);
    return v ? *v : Value::undefined(name);
  }
  if (obj.is_group && (name == "grouper" || name == "list")) return (*obj.list)[name == "list"];
  if (obj.range && (name == "start" || name == "stop" || name == "step"))
    return name == "start" ? obj.range->start : name == "stop" ? obj.range->stop : obj.range->step;
  if (has_method(obj, name)) {
    return Value::function(name, [obj, name](CallArgs& a) { return call_method(obj, name, a); });
  }
  if (is_mutator(obj, name)) {
    return Value::function(name, [name](CallArgs&) -> Value {
      fail(
          "security error: '{}' would modify an immutable value (templates render in an immutable "
          "sandbox)",
          name);
    });
  }
  if (obj.is_dict()) {
    const Value* v = obj.dict->find(name);
    if (v) return *v;
  }
  return Value::undefined(name);
}

static bool normalize_index(int64_t& idx, size_t size) {
  if (idx < 0) idx += static_cast<int64_t>(size);
  return idx >= 0 && idx < static_cast<int64_t>(size);
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) undefined_error(obj);
  if (obj.is_dict()) {
    if (key.is_string()) {
      const Value* v = obj.dict->find(key.s);
      if (v) return *v;
      return get_attr(obj, key.s);
    }
    return Value::undefined();
  }
  if ((obj.is_list() || obj.is_string()) && key.is_integral()) {
    int64_t idx = key.as_int();
    if (obj.is_list())
      return normalize_index(idx, obj.list->size()) ? (*obj.list)[idx] : Value::undefined();
    std::u32string c = utf8_decode(obj.s);
    return normalize_index(idx, c.size()) ? Value::string(utf8_encode(c.substr(idx, 1)))
                                          : Value::undefined();
  }
  if (key.is_string()) return get_attr(obj, key.s);
  return Value::undefined();
}

Value get_slice(const Value& obj, const Value& start_v, const Value& stop_v, const Value& step_v) {
  // As jinja2: an undefined value or bound fails; a value that cannot be sliced, or a bound of
  // another type, gives an undefined value (its getitem turns Python's TypeError into Undefined).
  if (obj.is_undefined()) undefined_error(obj);
  for (const Value* v : {&start_v, &stop_v, &step_v})
    if (v->is_undefined()) fail("slice indices must be integers or None");
  if (!obj.is_list() && !obj.is_string()) return Value::undefined();
  for (const Value* v : {&start_v, &stop_v, &step_v})
    if (!v->is_none() && !v->is_integral()) return Value::undefined();
  auto idx = [](const Value& v) -> std::optional<int64_t> {
    if (v.is_none()) return std::nullopt;
    return v.as_int();
  };
  std::u32string chars;
  if (obj.is_string()) chars = utf8_decode(obj.s);
  int64_t n =
      obj.is_list() ? static_cast<int64_t>(obj.list->size()) : static_cast<int64_t>(chars.size());
  int64_t step = idx(step_v).value_or(1);
  if (step == 0) fail("slice step cannot be zero");
  // CPython's PySlice_AdjustIndices.
  auto adjust = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) {
      x += n;
      if (x < 0) x = step < 0 ? -1 : 0;
    } else if (x >= n) {
      x = step < 0 ? n - 1 : n;
    }
    return x;
  };
  int64_t start = adjust(idx(start_v), step < 0 ? n - 1 : 0);
  int64_t stop = adjust(idx(stop_v), step < 0 ? -1 : n);
  ValueList items;
  std::u32string out;
  for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) {
    if (obj.is_list()) {
      items.push_back((*obj.list)[k]);
    } else {
      out += chars[k];
    }
  }
  if (obj.range) {  // a range's slice is a range: Python's bounds from the adjusted indices
    const PyRange& r = *obj.range;
    auto at = [&](int64_t k) { return binary_op("+", r.start, binary_op("*", Value::integer(k), r.step)); };
    return Value::make_range(std::move(items), at(start), at(stop), binary_op("*", r.step, Value::integer(step)));
  }
  if (obj.is_list()) return obj.is_tuple ? Value::make_tuple(std::move(items)) : Value::make_list(std::move(items));
  return Value::string(utf8_encode(out));
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined:
      return {};
    case Value::Kind::kList:
      return *v.list;
    case Value::Kind::kDict: {
      std::vector<Value> keys;
      for (const auto& [k, x] : v.dict->items) keys.push_back(Value::string(k));
      return keys;
    }
    case Value::Kind::kString: {
      std::vector<Value> chars;
      for (char32_t c : utf8_decode(v.s))
        chars.push_back(Value::string(utf8_encode(std::u32string(1, c))));
      return chars;
    }
    default:
      fail("'{}' object is not iterable", type_name(v));
  }
}

size_t py_len(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined:
      return 0;
    case Value::Kind::kString:
      return utf8_decode(v.s).size();
    case Value::Kind::kList:
      return v.list->size();
    case Value::Kind::kDict:
      return v.dict->items.size();
    default:
      fail("object of type '{}' has no len()", type_name(v));
  }
}

bool contains(const Value& container, const Value& item) {
  if (container.is_string()) {
    if (!item.is_string())
      fail("'in <string>' requires string as left operand, not {}", type_name(item));
    return container.s.find(item.s) != std::string::npos;
  }
  if (container.is_dict()) return item.is_string() && container.dict->find(item.s) != nullptr;
  if (container.is_list()) {
    for (const auto& x : *container.list)
      if (equals(x, item)) return true;
    return false;
  }
  if (container.is_undefined()) return false;
  fail("argument of type '{}' is not iterable", type_name(container));
}

static Value kwargs_dict(CallArgs& a, const char* fn) {
  Dict d;
  if (!a.pos.empty()) {
    if (a.pos.size() > 1 || !a.pos[0].is_dict())
      fail("{}() takes a single mapping or keyword arguments", fn);
    d = *a.pos[0].dict;
  }
  for (auto& [k, v] : a.kw) d.set(k, v);
  return Value::make_dict(std::move(d));
}

void add_globals(Dict& g) {
  g.set("raise_exception", Value::function("raise_exception", [](CallArgs& a) -> Value {
          fail("raise_exception: {}", to_str(arg_or(a, 0, "message", Value::string(""))));
        }));
  g.set("strftime_now", Value::function("strftime_now", [](CallArgs& a) {
          std::string f = need_str(arg_or(a, 0, "format", Value::none()), "strftime_now format");
          std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
          std::tm tm{};
          localtime_r(&now, &tm);
          char buf[256];
          size_t n = std::strftime(buf, sizeof buf, f.c_str(), &tm);
          return Value::string(std::string(buf, n));
        }));
  g.set("namespace", Value::function("namespace", [](CallArgs& a) {
          Value d = kwargs_dict(a, "namespace");
          return Value::make_namespace(*d.dict);
        }));
  g.set("dict", Value::function("dict", [](CallArgs& a) { return kwargs_dict(a, "dict"); }));
  g.set("range", Value::function("range", [](CallArgs& a) {
          if (a.pos.empty() || a.pos.size() > 3 || !a.kw.empty())
            fail("range() expects 1 to 3 integer arguments");
          for (const auto& v : a.pos)
            if (!v.is_integral()) fail("range() arguments must be integers, not {}", type_name(v));
          int64_t start = a.pos.size() > 1 ? a.pos[0].as_int() : 0;
          int64_t stop = a.pos.size() > 1 ? a.pos[1].as_int() : a.pos[0].as_int();
          int64_t step = a.pos.size() > 2 ? a.pos[2].as_int() : 1;
          if (step == 0) fail("range() arg 3 must not be zero");
          ValueList out;
          for (int64_t k = start; step > 0 ? k < stop : k > stop;) {
            if (out.size() >= 100000)
              fail("range too big, the sandbox allows at most 100000 items");
            out.push_back(Value::integer(k));
            if (__builtin_add_overflow(k, step, &k)) break;  // past int64: beyond stop too
          }
          return Value::make_range(std::move(out), Value::integer(start), Value::integer(stop),
                                   Value::integer(step));
        }));
}

}  // namespace lite_llama::jinja
