// libFuzzer target for the GGUF reader: any byte string must parse or throw lite_llama::Error,
// and whatever parses must be readable in full (every tensor byte range, every metadata value).
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "io/gguf.h"

using namespace lite_llama;

namespace {

// Every typed accessor either converts or throws Error; none may do anything else.
template <typename F>
size_t try_get(F&& get) {
  try {
    return size_t(get());
  } catch (const Error&) {
    return 0;
  }
}

// Walks nested arrays too, so every parsed value is visited, not only the first few items
// that to_string shows.
size_t visit(const gguf::Value& v) {
  size_t n = v.to_string().size();
  if (v.type == gguf::ValueType::ARRAY)
    for (const gguf::Value& item : v.as_array("k")) n += visit(item);
  return n;
}

// Top-level values only: a failing accessor throws, and throwing for each of thousands of array
// items would slow the fuzzer several times over for no new paths.
size_t try_accessors(const gguf::Value& v) {
  return try_get([&] { return v.as_u64("k"); }) + try_get([&] { return v.as_i64("k"); }) +
         try_get([&] { return v.as_f64("k") != 0; }) + try_get([&] { return v.as_bool("k"); }) +
         try_get([&] { return v.as_string("k").size(); }) +
         try_get([&] { return v.as_array("k").size(); });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::unique_ptr<gguf::File> f;
  try {
    f = gguf::File::parse(data, size, "fuzz.gguf");
  } catch (const Error&) {
    return 0;
  }
  // volatile: keeps the reads the sanitizers must check from being optimised away.
  volatile size_t sink = 0;
  for (const auto& kv : f->metadata()) {
    const std::string& key = kv.first;  // a plain reference: clang 14 cannot capture bindings
    const gguf::Value& v = kv.second;
    if (&f->get(key) != &v) __builtin_trap();  // keys are unique, so lookup finds this one
    sink = sink + visit(v) + try_accessors(v) + try_get([&] { return f->get_u64(key, 0); }) +
           try_get([&] { return f->get_string(key, "").size(); });
  }
  for (const gguf::TensorInfo& t : f->tensors()) {
    if (f->find_tensor(t.name) != &t) __builtin_trap();
    Tensor view = t.view();
    if (view.nbytes() != t.nbytes) __builtin_trap();
    if (t.nbytes > 0) sink = sink + t.data[0] + t.data[t.nbytes - 1];
  }
  (void)sink;
  return 0;
}
