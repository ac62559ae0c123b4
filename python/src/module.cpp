// lite_llama._core: the native half of the Python package (python/lite_llama/ is the other).
// Bindings only; the engine loop is in core_engine.cpp. Errors: ArgumentError -> ValueError,
// every other engine error -> RuntimeError (pybind11's std::runtime_error translation).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "core_engine.h"
#include "lite_llama/backend_options.h"
#include "lite_llama/structured_output.h"

namespace py = pybind11;
using namespace lite_llama;
using lite_llama::python::ArgumentError;
using lite_llama::python::Completion;
using lite_llama::python::CoreEngine;

namespace {

// Token text can end inside a UTF-8 sequence (one token of a multi-byte character): such bytes
// become U+FFFD, as HF's decode does, instead of a UnicodeDecodeError.
py::str utf8(const std::string& s) {
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), Py_ssize_t(s.size()), "replace");
  if (!o) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}

template <typename F>
auto parse_arg(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::runtime_error& e) {
    throw ArgumentError(e.what());
  }
}

EngineOptions engine_options(const py::kwargs& kw) {
  EngineOptions o;
  for (auto [key, value] : kw) {
    const std::string k = py::cast<std::string>(key);
    auto str = [&] { return py::cast<std::string>(value); };
    if (k == "model") o.model = str();
    else if (k == "device") o.backend.device = parse_arg([&] { return parse_device(str()); });
    else if (k == "dtype") o.backend.dtype = parse_arg([&] { return parse_act_type(str()); });
    else if (k == "quantize") o.backend.quantize =
        parse_arg([&] { return parse_quant_mode(str()); });
    else if (k == "threads") o.backend.threads = py::cast<int>(value);
    else if (k == "load_format") o.load_format = str();
    else if (k == "dummy_seed") o.dummy_seed = py::cast<uint64_t>(value);
    else if (k == "ctx") o.ctx = py::cast<int>(value);
    else if (k == "max_num_seqs") o.max_num_seqs = py::cast<int>(value);
    else if (k == "max_batched_tokens") o.max_batched_tokens = py::cast<int>(value);
    else if (k == "kv_tokens") o.kv_tokens = py::cast<int64_t>(value);
    else if (k == "gpu_memory_utilization") o.gpu_memory_utilization = py::cast<float>(value);
    else if (k == "cuda_graph") o.cuda_graph = py::cast<bool>(value);
    else if (k == "prefix_cache") o.prefix_cache = py::cast<bool>(value);
    else if (k == "tensor_parallel_size") o.tp = py::cast<int>(value);
    else if (k == "chat_template") o.chat_template = str();
    else throw ArgumentError("unknown engine option '" + k + "'");
  }
  return o;
}

py::dict info_dict(const ModelInfo& i) {
  py::dict d;
  d["path"] = i.path, d["name"] = i.name, d["arch"] = i.arch, d["format"] = i.format;
  d["weight_dtype"] = i.weight_dtype, d["device"] = i.device, d["backend"] = i.backend;
  d["params"] = i.params, d["vocab_size"] = i.vocab_size, d["hidden_size"] = i.hidden_size;
  d["num_layers"] = i.num_layers, d["num_heads"] = i.num_heads, d["num_kv_heads"] = i.num_kv_heads;
  d["head_dim"] = i.head_dim, d["context_length"] = i.context_length, d["ctx"] = i.ctx;
  d["num_experts"] = i.num_experts, d["experts_per_token"] = i.experts_per_token;
  d["kv_slots"] = i.kv_slots, d["max_num_seqs"] = i.max_num_seqs, d["load_ms"] = i.load_ms;
  d["weight_bytes"] = i.weight_bytes, d["kv_bytes"] = i.kv_bytes, d["tensor_parallel_size"] = i.tp;
  d["special_tokens"] = py::dict(py::cast(i.special_tokens));
  d["stop_ids"] = i.stop_ids;
  return d;
}

py::dict stats_dict(const EngineStats& s) {
  py::dict d;
  d["running"] = s.running, d["waiting"] = s.waiting;
  d["kv_slots_used"] = s.kv_slots_used, d["kv_slots_total"] = s.kv_slots_total;
  d["preemptions"] = s.preemptions, d["prefix_cached_tokens"] = s.prefix_cached_tokens;
  d["prefix_query_tokens"] = s.prefix_query_tokens, d["prefix_hit_tokens"] = s.prefix_hit_tokens;
  d["device_free"] = s.device_free, d["device_total"] = s.device_total;
  return d;
}

void bind_grammar(py::module_& m) {
  m.def("json_schema_grammar", [](const std::string& s) { return parse_arg([&] { return json_schema_grammar(s); }); },
        "GBNF for a JSON Schema (JSON text); ValueError naming an unsupported keyword.");
  m.def("regex_grammar", [](const std::string& s) { return parse_arg([&] { return regex_grammar(s); }); },
        "GBNF for a regular expression; ValueError naming an unsupported construct.");
  m.def("choice_grammar", [](const std::vector<std::string>& c) { return parse_arg([&] { return choice_grammar(c); }); },
        "GBNF for exactly one of the strings.");
  m.def("check_grammar", [](const std::string& g) { parse_arg([&] { check_grammar(g); }); },
        "ValueError with the line and column of the first error of a GBNF grammar.");
}

void bind_types(py::module_& m) {
  bind_grammar(m);
  py::class_<SamplingParams>(m, "SamplingParams", "The engine's sampling parameters (C++).")
      .def(py::init<>())
      .def_readwrite("temperature", &SamplingParams::temperature)
      .def_readwrite("top_k", &SamplingParams::top_k)
      .def_readwrite("top_p", &SamplingParams::top_p)
      .def_readwrite("min_p", &SamplingParams::min_p)
      .def_readwrite("repetition_penalty", &SamplingParams::repetition_penalty)
      .def_readwrite("presence_penalty", &SamplingParams::presence_penalty)
      .def_readwrite("frequency_penalty", &SamplingParams::frequency_penalty)
      .def_readwrite("seed", &SamplingParams::seed)
      .def_readwrite("max_tokens", &SamplingParams::max_tokens)
      .def_readwrite("min_tokens", &SamplingParams::min_tokens)
      .def_readwrite("include_stop_str_in_output", &SamplingParams::include_stop_str_in_output)
      .def_readwrite("skip_special_tokens", &SamplingParams::skip_special_tokens)
      .def_readwrite("stop", &SamplingParams::stop)
      .def_readwrite("stop_token_ids", &SamplingParams::stop_token_ids)
      .def_readwrite("ignore_eos", &SamplingParams::ignore_eos)
      .def_readwrite("top_logprobs", &SamplingParams::top_logprobs)
      .def_readwrite("prompt_logprobs", &SamplingParams::prompt_logprobs)
      .def_readwrite("grammar", &SamplingParams::grammar)
      .def_readwrite("logit_bias", &SamplingParams::logit_bias)
      .def_readwrite("allowed_token_ids", &SamplingParams::allowed_token_ids)
      .def_readwrite("bad_words", &SamplingParams::bad_words)
      .def("validate", [](const SamplingParams& p) { parse_arg([&] { p.validate(); }); },
           "Raises ValueError naming the first parameter out of range.");

  py::class_<ChatMessage>(m, "ChatMessage")
      .def(py::init<std::string, std::string, std::string, std::string, std::string>(), py::arg("role"),
           py::arg("content"), py::arg("reasoning_content") = "", py::arg("tool_calls") = "",
           py::arg("tool_call_id") = "")
      .def_readonly("role", &ChatMessage::role)
      .def_readonly("content", &ChatMessage::content)
      .def_readonly("reasoning_content", &ChatMessage::reasoning_content)
      .def_readonly("tool_calls", &ChatMessage::tool_calls)
      .def_readonly("tool_call_id", &ChatMessage::tool_call_id);

  py::class_<TokenLogprobs>(m, "TokenLogprobs")
      .def_readonly("token", &TokenLogprobs::token)
      .def_readonly("logprob", &TokenLogprobs::logprob)
      .def_readonly("rank", &TokenLogprobs::rank)
      .def_readonly("top", &TokenLogprobs::top);

  py::class_<Completion>(m, "Completion")
      .def_readonly("token_ids", &Completion::token_ids)
      .def_property_readonly("text", [](const Completion& c) { return utf8(c.text); })
      .def_readonly("logprobs", &Completion::logprobs)
      .def_readonly("prompt_logprobs", &Completion::prompt_logprobs)
      .def_readonly("finish_reason", &Completion::finish_reason)
      .def_readonly("prompt_tokens", &Completion::prompt_tokens)
      .def_readonly("cached_tokens", &Completion::cached_tokens);

  py::class_<RequestOutput>(m, "StepOutput")
      .def_readonly("id", &RequestOutput::id)
      .def_readonly("tokens", &RequestOutput::tokens)
      .def_property_readonly("text", [](const RequestOutput& o) { return utf8(o.text); })
      .def_readonly("logprobs", &RequestOutput::logprobs)
      .def_readonly("prompt_logprobs", &RequestOutput::prompt_logprobs)
      .def_readonly("finished", &RequestOutput::finished)
      .def_property_readonly("finish_reason",
                             [](const RequestOutput& o) { return finish_reason_name(o.finish_reason); })
      .def_readonly("cached_tokens", &RequestOutput::cached_tokens)
      .def_readonly("error", &RequestOutput::error);

  py::class_<ScoreResult>(m, "ScoreResult")
      .def_readonly("logprobs", &ScoreResult::logprobs)
      .def_readonly("argmax", &ScoreResult::argmax);
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "lite-llama's native engine (use the lite_llama package, not this module)";
  m.attr("__version__") = LL_VERSION;
  m.attr("built_with_cuda") = bool(LL_BUILT_WITH_CUDA);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const ArgumentError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });
  lite_llama::python::note_main_thread();
  bind_types(m);

  py::class_<CoreEngine>(m, "Engine")
      .def(py::init([](const py::kwargs& kw) {
             return std::make_unique<CoreEngine>(engine_options(kw));
           }),
           "Loads a model: the EngineOptions fields as keywords (device, dtype and quantize as "
           "their flag spellings).")
      .def("tokenize", &CoreEngine::tokenize, py::arg("text"), py::arg("add_special"),
           py::arg("parse_special"))
      .def("detokenize",
           [](const CoreEngine& e, const std::vector<int32_t>& ids) {
             return utf8(e.detokenize(ids));
           },
           py::arg("ids"))
      .def("token_text", [](const CoreEngine& e, int32_t id) { return utf8(e.token_text(id)); },
           py::arg("id"))
      .def("apply_chat_template", &CoreEngine::apply_chat_template, py::arg("messages"),
           py::arg("add_generation_prompt"), py::arg("extra_json") = "", py::arg("continue_final") = false,
           py::arg("chat_template") = "")
      .def("generate", &CoreEngine::generate, py::arg("prompts"), py::arg("params"),
           py::arg("progress") = py::none())
      .def("add_request", &CoreEngine::add_request, py::arg("prompt"), py::arg("params"))
      .def("step", &CoreEngine::step)
      .def("abort", &CoreEngine::abort, py::arg("ids"))
      .def("has_unfinished", &CoreEngine::has_unfinished)
      .def("score", &CoreEngine::score, py::arg("seqs"), py::arg("decode_tail") = 0)
      .def("info", [](const CoreEngine& e) { return info_dict(e.info()); })
      .def("stats", [](const CoreEngine& e) { return stats_dict(e.stats()); });
}
