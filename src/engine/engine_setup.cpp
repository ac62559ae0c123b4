#include "engine/engine_setup.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <string>

#include "backends/factory.h"
#include "core/error.h"
#include "core/log.h"
#include "model/tp_shard.h"

namespace lite_llama {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kGiB = 1024.0 * kMiB;
constexpr double kGraphReserve = 256.0 * (1 << 20);  // graphs, cuBLAS, fragmentation

// The context where --ctx leaves it open: on a GPU the model's own length up to 131,072 (Llama
// 3.2's), where the pool is shared token by token and a long context costs only the request table
// (4 bytes a position and sequence: 128 MiB at 256 sequences) and the rotary table (computed on
// the host at load); at most 8,192 on the CPU, whose pool is 2 GiB. Either is cut to the KV pool
// later if that holds less; --ctx asks for more.
int default_ctx(const ModelConfig& cfg, bool cpu) {
  return int(std::min<int64_t>(cfg.max_position_embeddings, cpu ? 8192 : 131072));
}

// The KV pool where --kv-tokens leaves it open: enough for every sequence at full context,
// capped by memory: 2 GiB on the CPU, the --gpu-memory-utilization share of what is free after
// weights, buffers and the request table on a GPU.
int64_t default_kv_tokens(const EngineOptions& o, const ops::Backend& backend, size_t free, int64_t per_token,
                          int max_seqs, int ctx) {
  int64_t cap = (int64_t(2) << 30) / per_token;
  if (backend.device() == Device::CUDA) {
    const double table = double(max_seqs) * double(ctx) * sizeof(int32_t);
    cap = int64_t((double(free) * o.gpu_memory_utilization - kGraphReserve - table) / double(per_token));
    LL_CHECK(cap >= 16, "not enough GPU memory left for the KV cache ({:.0f} MiB free)",
             double(free) / kMiB);
  }
  return std::min<int64_t>(int64_t(max_seqs) * ctx, std::max<int64_t>(cap, 16));
}

// Host memory and swap (MemTotal + SwapTotal of /proc/meminfo), 0 if unknown: the most a lazily
// touched allocation (the CPU KV pool's) can grow to. MemAvailable would refuse pools that run.
size_t host_memory_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  size_t kib = 0, total = 0;
  while (f >> key >> kib) {
    if (key == "MemTotal:" || key == "SwapTotal:") total += kib * 1024;
    f.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return total;
}

// The step token budget: --max-batched-tokens (8,192 on a GPU, 512 on the CPU by default), at
// least one token per sequence, at most what a step can hold (every sequence's whole context, the
// KV pool), and on a GPU at most what the step buffers can take of the memory left: the rest
// after an explicit KV pool, else half (the pool is sized later from the other half). Prompts
// longer than the budget are prefilled in chunks of it.
int step_budget(const EngineOptions& o, const ops::Backend& backend, size_t free, const ModelConfig& cfg,
                int max_seqs, int ctx, int64_t kv_bytes_per_token) {
  const bool cpu = backend.device() == Device::CPU;
  const int64_t asked = o.max_batched_tokens ? o.max_batched_tokens : (cpu ? 512 : 8192);
  int64_t budget = std::min<int64_t>(asked, int64_t(max_seqs) * ctx);
  if (o.kv_tokens > 0) budget = std::min(budget, o.kv_tokens);
  if (!cpu) {
    double avail = double(free) * o.gpu_memory_utilization - kGraphReserve;
    avail = o.kv_tokens > 0 ? avail - double(o.kv_tokens) * double(kv_bytes_per_token) : avail / 2;
    const int64_t act_bytes = int64_t(dtype_info(backend.act_dtype()).block_bytes);
    const int64_t resid_bytes = int64_t(dtype_info(backend.residual_dtype()).block_bytes);
    const int64_t per_token = Decoder::step_bytes_per_token(cfg, act_bytes, resid_bytes);
    const int64_t fits = int64_t(std::max(0.0, avail) / double(per_token));
    if (budget > fits && budget > max_seqs) {
      const int64_t capped = std::max<int64_t>(fits, max_seqs);
      LL_WARN("a step of {} tokens needs {:.0f} MiB of activations, more than the GPU memory left allows: "
              "steps are capped at {} tokens (longer prompts are prefilled in chunks)",
              budget, double(budget * per_token) / kMiB, capped);
      budget = capped;
    }
  }
  return int(std::max<int64_t>(budget, max_seqs));
}

}  // namespace

std::vector<LoadedModel> load_model(const EngineOptions& o, ModelFiles& files,
                                    const std::vector<ops::Backend*>& backends, RankGroup& group) {
  const ModelConfig& full = files.config;
  const int tp = int(backends.size());  // check_tp(full, tp) held before the backends were made
  const ModelConfig cfg = shard_config(full, TpShard{0, tp});  // every rank's shapes
  ops::Backend& backend = *backends[0];
  const bool cpu = backend.device() == Device::CPU;
  LL_CHECK(cpu || cfg.head_dim == 64 || cfg.head_dim == 128,
           "{}: head_dim {} is not supported by the CUDA attention kernels (64, 128); use --device cpu",
           files.path, cfg.head_dim);
  std::vector<Weights> weights(static_cast<size_t>(tp));
  group.run([&](int r) { weights[size_t(r)] = load_weights(full, *files.weights, *backends[size_t(r)], {r, tp}); });
  // What the device computes with, where it differs from the file (GQ layouts, 16-bit).
  if (!weights[0].layers.empty() && !cpu) {
    const ops::Linear& l = weights[0].layers[0].moe ? weights[0].layers[0].router : weights[0].layers[0].gate_up;
    const std::string dev(dtype_name(l.parts[0].dtype));
    if (dev != files.weight_dtype) files.weight_dtype += " -> " + dev;
  }
  // The least device memory any rank has left.
  auto free_memory = [&] {
    std::vector<size_t> free(static_cast<size_t>(tp), 0);
    group.run([&](int r) {
      size_t total = 0;
      backends[size_t(r)]->memory_info(&free[size_t(r)], &total);
    });
    return *std::min_element(free.begin(), free.end());
  };

  LoadedModel m;
  LL_CHECK(o.ctx == 0 || o.ctx >= 2, "--ctx must be 0 (the model's) or at least 2, got {}", o.ctx);
  LL_CHECK(o.ctx <= cfg.max_position_embeddings,
           "--ctx {} exceeds the model's context length {}", o.ctx, cfg.max_position_embeddings);
  m.ctx = o.ctx ? o.ctx : default_ctx(cfg, cpu);
  LL_CHECK(o.max_num_seqs >= 0 && o.max_num_seqs <= 4096, "--max-num-seqs must be in 1..4096");
  m.max_seqs = o.max_num_seqs ? o.max_num_seqs : (cpu ? 16 : 256);
  LL_CHECK(o.max_batched_tokens >= 0, "--max-batched-tokens must be positive");
  LL_CHECK(o.max_prefill_with_decodes >= 0, "--max-prefill-with-decodes must be 0 or more");
  LL_CHECK(o.kv_tokens == 0 || o.kv_tokens >= 2, "--kv-tokens must be 0 (sized from memory) or at least 2, got {}",
           o.kv_tokens);
  LL_CHECK(o.gpu_memory_utilization > 0 && o.gpu_memory_utilization <= 1,
           "--gpu-memory-utilization must be in (0, 1], got {}", o.gpu_memory_utilization);
  const int64_t kv_elem = int64_t(dtype_info(backend.kv_dtype()).block_bytes);
  m.kv_bytes_per_token = cfg.kv_bytes_per_token(kv_elem);
  m.max_batched_tokens = step_budget(o, backend, cpu ? 0 : free_memory(), cfg, m.max_seqs, m.ctx,
                                     m.kv_bytes_per_token);
  std::vector<LoadedModel> out(static_cast<size_t>(tp));
  group.run([&](int r) {
    out[size_t(r)].decoder = std::make_unique<Decoder>(cfg, std::move(weights[size_t(r)]), *backends[size_t(r)],
                                                       m.max_batched_tokens, m.max_seqs, m.ctx, TpShard{r, tp});
  });
  int64_t kv_tokens = o.kv_tokens;
  if (kv_tokens > 0) {
    // An explicit pool past the memory there is failed in the allocator, naming no argument ("out
    // of host memory allocating 98956046453760 bytes"). On a GPU the request table and the graphs'
    // reserve are allocated after it.
    const double need = double(kv_tokens) * double(m.kv_bytes_per_token);
    const double after = cpu ? 0.0
                             : double(m.max_seqs) * double(std::min<int64_t>(m.ctx, kv_tokens)) * sizeof(int32_t) +
                                   kGraphReserve;
    const size_t have = cpu ? host_memory_bytes() : free_memory();
    LL_CHECK(have == 0 || need + after <= double(have),
             "--kv-tokens {}: the KV cache needs {:.1f} GiB, more than the {:.1f} GiB of {}", kv_tokens, need / kGiB,
             double(have) / kGiB, cpu ? "host memory and swap" : "GPU memory free");
  }
  if (kv_tokens == 0)
    kv_tokens = default_kv_tokens(o, backend, cpu ? 0 : free_memory(), m.kv_bytes_per_token, m.max_seqs, m.ctx);
  LL_CHECK(kv_tokens <= std::numeric_limits<int32_t>::max(), "--kv-tokens too large");
  if (kv_tokens < m.ctx) {
    // A sequence longer than the pool could never be re-admitted after preemption.
    if (o.ctx)
      LL_WARN("the KV pool holds {} tokens, below the context {}: the context is reduced to {}",
              kv_tokens, m.ctx, kv_tokens);
    else
      LL_INFO("context {} tokens: what the KV pool holds (the default would be {})", kv_tokens, m.ctx);
    m.ctx = int(kv_tokens);
  }
  m.kv_tokens = kv_tokens;
  group.run([&](int r) {
    LoadedModel& lm = out[size_t(r)];
    lm.ctx = m.ctx, lm.max_seqs = m.max_seqs, lm.max_batched_tokens = m.max_batched_tokens;
    lm.kv_tokens = m.kv_tokens, lm.kv_bytes_per_token = m.kv_bytes_per_token;
    lm.kv = std::make_unique<KvCache>(cfg, *backends[size_t(r)], kv_tokens, m.max_seqs, m.ctx);
    lm.decoder->set_kv_cache(lm.kv.get());
  });
  return out;
}

RankModels::RankModels(const EngineOptions& o, const BackendOptions& bo, ModelFiles& files) {
  check_tp(files.config, o.tp);
  backends_ = make_backends(bo, o.tp);
  std::vector<ops::Backend*> raw;
  for (auto& b : backends_) raw.push_back(b.get());
  group_ = std::make_unique<RankGroup>(raw);
  models_ = load_model(o, files, raw, *group_);
}

RankModels::~RankModels() {
  // CUDA memory and streams are released on the thread whose device they belong to.
  group_->run([&](int r) {
    models_[size_t(r)] = LoadedModel{};
    backends_[size_t(r)].reset();
  });
}

std::vector<Decoder*> RankModels::decoders() const {
  std::vector<Decoder*> d;
  for (const LoadedModel& m : models_) d.push_back(m.decoder.get());
  return d;
}

ModelInfo make_model_info(const ModelFiles& files, const ops::Backend& backend,
                          const LoadedModel& m, double load_ms) {
  const ModelConfig& c = files.config;
  ModelInfo i;
  i.path = files.path;
  i.name = c.name;
  i.arch = c.arch;
  i.format = files.format;
  i.weight_dtype = files.weight_dtype;
  i.rope_scaling = rope_scaling_name(c.rope_scaling);
  i.device = device_name(backend.device());
  i.backend = backend.name();
  i.params = count_parameters(c);
  i.vocab_size = c.vocab_size;
  i.hidden_size = c.hidden_size;
  i.num_layers = c.num_layers;
  i.num_heads = c.num_heads;
  i.num_kv_heads = c.num_kv_heads;
  i.head_dim = c.head_dim;
  i.intermediate_size = c.intermediate_size;
  i.num_experts = c.num_experts;
  i.experts_per_token = c.num_experts_per_tok;
  i.expert_intermediate_size = c.moe_intermediate_size;
  i.context_length = c.max_position_embeddings;
  i.rope_theta = c.rope_theta;
  i.tied_embeddings = c.tie_word_embeddings;
  i.qkv_bias = c.qkv_bias;
  i.qk_norm = c.qk_norm;
  i.kv_bytes_per_token = m.kv_bytes_per_token;
  i.tp = m.decoder->shard().size;
  i.ctx = m.ctx;
  i.kv_slots = m.kv_tokens;
  i.max_num_seqs = m.max_seqs;
  i.load_ms = load_ms;
  i.weight_bytes = m.decoder->weights().device_bytes;
  i.kv_bytes = m.kv->bytes();
  i.activation_bytes = m.decoder->activation_bytes();
  const Tokenizer& t = *files.tokenizer;
  auto add = [&](const char* name, int32_t id) {
    if (id >= 0) i.special_tokens.emplace_back(name, id);
  };
  add("bos", t.bos_id());
  add("eos", t.eos_id());
  add("eot", t.eot_id());
  add("pad", t.pad_id());
  add("unk", t.unk_id());
  i.stop_ids = t.stop_ids();
  return i;
}

}  // namespace lite_llama
