// Tokenizer::from_hf_dir: tokenizer.json (+ tokenizer_config.json, generation_config.json) ->
// HfTokenizerParts -> HfTokenizer. Only the BPE model is supported, which covers the Llama 2/3,
// Qwen2/2.5/3, SmolLM2 and Mistral families.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <unordered_map>

#include "core/error.h"
#include "tokenizer/hf_json.h"
#include "tokenizer/hf_tokenizer.h"

namespace lite_llama {

namespace {

namespace fs = std::filesystem;
using hfjson::child;
using hfjson::index;
using hfjson::json;

// Ids beyond this are a corrupt file, not a vocabulary: refuse before allocating for them.
constexpr int64_t kMaxTokenId = 1 << 24;

json read_json_file(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  LL_CHECK(f, "{}: cannot open", path.string());
  const std::string data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  try {
    return json::parse(data);
  } catch (const json::parse_error& e) {
    fail("{}: malformed JSON at byte {}: {}", path.string(), e.byte, e.what());
  }
}

int32_t token_id_at(const json& obj, std::string_view key, const std::string& where) {
  const int64_t id = hfjson::int_at(obj, key, where);
  LL_CHECK(id >= 0 && id < kMaxTokenId, "{}: token id {} is out of range", child(where, key), id);
  return static_cast<int32_t>(id);
}

void parse_model(const json& m, const std::string& where, HfTokenizerParts& p) {
  std::string type = hfjson::string_or(m, "type", "", where);
  // Old files leave the type out; tokenizers then recognises BPE by its merges.
  if (type.empty() && hfjson::find(m, "merges")) type = "BPE";
  LL_CHECK(type == "BPE", "{}: model type '{}' is not supported (only BPE)", child(where, "type"),
           type);

  const std::string vw = child(where, "vocab");
  const json& vocab = hfjson::member(m, "vocab", where);
  LL_CHECK(vocab.is_object(), "{}: expected an object of token -> id", vw);
  for (const auto& [text, id] : vocab.items()) {
    LL_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < kMaxTokenId,
             "{}: token '{}' has an invalid id {}", vw, text, id.dump());
    const auto i = static_cast<size_t>(id.get<int64_t>());
    if (i >= p.model_tokens.size()) p.model_tokens.resize(i + 1);
    p.model_tokens[i] = text;
  }
  LL_CHECK(!p.model_tokens.empty(), "{}: the vocabulary is empty", vw);

  const std::string mw = child(where, "merges");
  p.merges_key = mw;
  if (const json* merges = hfjson::find(m, "merges")) {
    LL_CHECK(merges->is_array(), "{}: expected an array", mw);
    for (size_t i = 0; i < merges->size(); ++i) {
      const json& e = (*merges)[i];
      if (e.is_string() && p.merge_pairs.empty()) {
        p.merges.push_back(e.get<std::string>());
      } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string() &&
                 p.merges.empty()) {
        p.merge_pairs.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
      } else {
        fail("{}: expected \"left right\" strings or [left, right] pairs, one form throughout",
             index(mw, i));
      }
    }
  }
  if (const json* d = hfjson::find(m, "dropout"); d && !d->is_null()) {
    LL_CHECK(d->is_number() && d->get<double>() == 0.0,
             "{}: BPE dropout is not supported (it makes encoding random)",
             child(where, "dropout"));
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    LL_CHECK(hfjson::string_or(m, key, "", where).empty(), "{}: is not supported",
             child(where, key));
  }
  if (const std::string unk = hfjson::string_or(m, "unk_token", "", where); !unk.empty()) {
    const auto it = std::find(p.model_tokens.begin(), p.model_tokens.end(), unk);
    LL_CHECK(it != p.model_tokens.end(), "{}: '{}' is not in the vocabulary",
             child(where, "unk_token"), unk);
    p.model_opts.unk = static_cast<int32_t>(it - p.model_tokens.begin());
  }
  p.model_opts.fuse_unk = hfjson::bool_or(m, "fuse_unk", false, where);
  p.model_opts.byte_fallback = hfjson::bool_or(m, "byte_fallback", false, where);
  p.model_opts.ignore_merges = hfjson::bool_or(m, "ignore_merges", false, where);
}

AddedToken parse_added_token(const json& e, int32_t id, const std::string& where) {
  AddedToken t;
  t.id = id;
  t.content = hfjson::string_at(e, "content", where);
  LL_CHECK(!t.content.empty(), "{}: empty content", child(where, "content"));
  t.special = hfjson::bool_or(e, "special", false, where);
  // HF's default: special tokens are matched verbatim, others in normalised text.
  t.normalized = hfjson::bool_or(e, "normalized", !t.special, where);
  t.lstrip = hfjson::bool_or(e, "lstrip", false, where);
  t.rstrip = hfjson::bool_or(e, "rstrip", false, where);
  t.single_word = hfjson::bool_or(e, "single_word", false, where);
  return t;
}

// Ids of a post-processor's special token, by the name the template uses.
std::vector<int32_t> template_ids(const json& specials, const std::string& name,
                                  const std::string& where) {
  const json& s = hfjson::member(specials, name, where);
  const json& ids = hfjson::member(s, "ids", child(where, name));
  LL_CHECK(ids.is_array(), "{}: expected an array of ids", child(child(where, name), "ids"));
  std::vector<int32_t> out;
  for (const json& id : ids) {
    LL_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < kMaxTokenId,
             "{}: invalid id {}", child(child(where, name), "ids"), id.dump());
    out.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  return out;
}

// The tokens add_special puts around a single text: TemplateProcessing's "single" template
// (ByteLevel post-processors add nothing).
void parse_post_processor(const json& j, const std::string& where, HfTokenizerParts& p) {
  if (j.is_null()) return;
  const std::string type = hfjson::type_of(j, where);
  if (type == "Sequence") {
    const std::string w = child(where, "processors");
    const json& list = hfjson::member(j, "processors", where);
    LL_CHECK(list.is_array(), "{}: expected an array", w);
    for (size_t i = 0; i < list.size(); ++i) parse_post_processor(list[i], index(w, i), p);
  } else if (type == "TemplateProcessing") {
    const std::string w = child(where, "single");
    const json& single = hfjson::member(j, "single", where);
    const json& specials = hfjson::member(j, "special_tokens", where);
    LL_CHECK(single.is_array(), "{}: expected an array", w);
    p.prefix.clear();
    p.suffix.clear();
    bool seen_text = false;
    for (size_t i = 0; i < single.size(); ++i) {
      const std::string iw = index(w, i);
      if (const json* st = hfjson::find(single[i], "SpecialToken")) {
        auto ids = template_ids(specials, hfjson::string_at(*st, "id", iw),
                                child(where, "special_tokens"));
        auto& dst = seen_text ? p.suffix : p.prefix;
        dst.insert(dst.end(), ids.begin(), ids.end());
      } else {
        LL_CHECK(hfjson::find(single[i], "Sequence"), "{}: expected SpecialToken or Sequence", iw);
        seen_text = true;
      }
    }
  } else if (type == "RobertaProcessing" || type == "BertProcessing") {
    auto id_of = [&](const char* key) {
      const json& v = hfjson::member(j, key, where);
      LL_CHECK(v.is_array() && v.size() == 2 && v[1].is_number_integer(),
               "{}: expected [token, id]", child(where, key));
      return static_cast<int32_t>(v[1].get<int64_t>());
    };
    p.prefix = {id_of("cls")};
    p.suffix = {id_of("sep")};
  } else if (type != "ByteLevel") {
    fail("{}: post-processor type '{}' is not supported (supported: TemplateProcessing, "
         "ByteLevel, Sequence)",
         child(where, "type"), type);
  }
}

// tokenizer_config.json names tokens by string or as an AddedToken object {"content": ...}.
std::string config_token(const json& cfg, std::string_view key, const std::string& where) {
  const json* v = hfjson::find(cfg, key);
  if (!v || v->is_null()) return {};
  if (v->is_object()) return hfjson::string_at(*v, "content", child(where, key));
  LL_CHECK(v->is_string(), "{}: expected a string or {{\"content\": ...}}", child(where, key));
  return v->get<std::string>();
}

std::string chat_template_of(const json& cfg, const fs::path& dir, const std::string& where) {
  if (const json* t = hfjson::find(cfg, "chat_template"); t && !t->is_null()) {
    if (t->is_string()) return t->get<std::string>();
    // Several named templates (e.g. "default", "tool_use"): the default one is for chat.
    LL_CHECK(t->is_array(), "{}: expected a string or a list of {{name, template}}",
             child(where, "chat_template"));
    for (size_t i = 0; i < t->size(); ++i) {
      const std::string w = index(child(where, "chat_template"), i);
      if (hfjson::string_at((*t)[i], "name", w) == "default") {
        return hfjson::string_at((*t)[i], "template", w);
      }
    }
    return {};
  }
  // Newer transformers write the template to a file of its own.
  if (fs::exists(dir / "chat_template.jinja")) {
    std::ifstream f(dir / "chat_template.jinja", std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  }
  if (fs::exists(dir / "chat_template.json")) {
    const fs::path path = dir / "chat_template.json";
    return chat_template_of(read_json_file(path), dir, path.string() + ": ");
  }
  return {};
}

std::vector<int32_t> int_or_list(const json& v, const std::string& where) {
  std::vector<int32_t> out;
  if (v.is_null()) return out;
  const json list = v.is_array() ? v : json::array({v});
  for (const json& e : list) {
    LL_CHECK(e.is_number_integer() && e.get<int64_t>() >= 0 && e.get<int64_t>() < kMaxTokenId,
             "{}: expected a token id or a list of them, found {}", where, e.dump());
    out.push_back(static_cast<int32_t>(e.get<int64_t>()));
  }
  return out;
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_hf_dir(const std::string& dir_arg) {
  fs::path dir(dir_arg);
  // A path to tokenizer.json itself names its directory.
  if (fs::is_regular_file(dir)) dir = dir.parent_path();
  LL_CHECK(fs::is_directory(dir), "{}: no such directory", dir_arg);
  const fs::path tok_path = dir / "tokenizer.json";
  LL_CHECK(fs::exists(tok_path), "{}: missing (a HF tokenizer directory needs tokenizer.json)",
           tok_path.string());
  const std::string tw = tok_path.string() + ": ";
  const json tj = read_json_file(tok_path);
  LL_CHECK(tj.is_object(), "{}: expected a JSON object at the top level", tok_path.string());

  HfTokenizerParts p;
  parse_model(hfjson::member(tj, "model", tw), child(tw, "model"), p);
  const json null_json;
  const json* added = hfjson::find(tj, "added_tokens");
  if (added && !added->is_null()) {
    const std::string w = child(tw, "added_tokens");
    LL_CHECK(added->is_array(), "{}: expected an array", w);
    for (size_t i = 0; i < added->size(); ++i) {
      const std::string ew = index(w, i);
      p.added.push_back(parse_added_token((*added)[i], token_id_at((*added)[i], "id", ew), ew));
    }
  }
  auto part = [&](const char* key) -> const json& {
    const json* v = hfjson::find(tj, key);
    return v ? *v : null_json;
  };
  p.normalizer = Normalizer::from_json(part("normalizer"), child(tw, "normalizer"));
  p.pre_tokenizer = HfPreTokenizer::from_json(part("pre_tokenizer"), child(tw, "pre_tokenizer"));
  p.decoder = HfDecoder::from_json(part("decoder"), child(tw, "decoder"));
  parse_post_processor(part("post_processor"), child(tw, "post_processor"), p);

  const fs::path cfg_path = dir / "tokenizer_config.json";
  const json cfg = fs::exists(cfg_path) ? read_json_file(cfg_path) : json::object();
  const std::string cw = cfg_path.string() + ": ";
  LL_CHECK(cfg.is_object(), "{}: expected a JSON object at the top level", cfg_path.string());
  if (const json* dec = hfjson::find(cfg, "added_tokens_decoder"); dec && dec->is_object()) {
    // Entries tokenizer.json lacks are added; tokenizer.json wins where both have an id.
    for (const auto& [key, e] : dec->items()) {
      const std::string ew = child(child(cw, "added_tokens_decoder"), key);
      int64_t id = -1;
      try {
        id = std::stoll(key);
      } catch (const std::exception&) {
      }
      LL_CHECK(id >= 0 && id < kMaxTokenId, "{}: the key is not a token id", ew);
      const bool known = std::any_of(p.added.begin(), p.added.end(),
                                     [&](const AddedToken& t) { return t.id == id; });
      if (!known) p.added.push_back(parse_added_token(e, static_cast<int32_t>(id), ew));
    }
  }

  // Tables are indexed by id, so an added id far past the vocabulary (a crafted file: one id of
  // 2^24 - 1 took 1 GB before the model's embedding count refused it) would size them. Real
  // tokenizers number added tokens right after the model's (a gap of a few thousand at most).
  const int64_t id_bound = 2 * int64_t(p.model_tokens.size() + p.added.size()) + 65536;
  for (const AddedToken& t : p.added)
    LL_CHECK(t.id < id_bound, "{}added token id {} is far past the vocabulary of {} tokens", tw, t.id,
             p.model_tokens.size());
  std::unordered_map<std::string, int32_t> ids;
  for (size_t i = 0; i < p.model_tokens.size(); ++i)
    if (!p.model_tokens[i].empty()) ids.emplace(p.model_tokens[i], static_cast<int32_t>(i));
  for (const AddedToken& t : p.added) ids[t.content] = t.id;
  auto lookup = [&](const std::string& key, bool required) {
    const std::string name = config_token(cfg, key, cw);
    if (name.empty()) return -1;
    const auto it = ids.find(name);
    LL_CHECK(it != ids.end() || !required, "{}: '{}' is not in the vocabulary", child(cw, key),
             name);
    return it == ids.end() ? -1 : it->second;
  };
  p.bos = lookup("bos_token", true);
  p.eos = lookup("eos_token", true);
  p.pad = lookup("pad_token", false);
  p.unk = lookup("unk_token", false);
  // Without a tokenizer_config.json the template's first token is the BOS.
  if (p.bos < 0 && !hfjson::find(cfg, "bos_token") && !p.prefix.empty()) p.bos = p.prefix[0];

  // transformers (5.x) rebuilds the template from these flags when the config sets either.
  const json* add_bos = hfjson::find(cfg, "add_bos_token");
  const json* add_eos = hfjson::find(cfg, "add_eos_token");
  if ((add_bos && !add_bos->is_null()) || (add_eos && !add_eos->is_null())) {
    p.prefix.clear();
    p.suffix.clear();
    if (hfjson::bool_or(cfg, "add_bos_token", false, cw) && p.bos >= 0) p.prefix.push_back(p.bos);
    if (hfjson::bool_or(cfg, "add_eos_token", false, cw) && p.eos >= 0) p.suffix.push_back(p.eos);
  }
  p.chat_template = chat_template_of(cfg, dir, cw);

  // Chat checkpoints end a turn with these even where generation_config.json is missing.
  for (const char* eot : {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>"}) {
    const auto it = std::find_if(p.added.begin(), p.added.end(),
                                 [&](const AddedToken& t) { return t.content == eot; });
    if (it != p.added.end() && it->special) {
      p.eot = it->id;
      break;
    }
  }

  const fs::path gen_path = dir / "generation_config.json";
  if (fs::exists(gen_path)) {
    const json gen = read_json_file(gen_path);
    const std::string gw = gen_path.string() + ": ";
    LL_CHECK(gen.is_object(), "{}: expected a JSON object", gen_path.string());
    if (const json* e = hfjson::find(gen, "eos_token_id")) {
      p.extra_stop_ids = int_or_list(*e, child(gw, "eos_token_id"));
      if (p.eos < 0 && !p.extra_stop_ids.empty()) p.eos = p.extra_stop_ids[0];
    }
    if (const json* b = hfjson::find(gen, "bos_token_id"); b && p.bos < 0) {
      const auto v = int_or_list(*b, child(gw, "bos_token_id"));
      if (!v.empty()) p.bos = v[0];
    }
  }

  auto tok = std::make_unique<HfTokenizer>(std::move(p));
  for (int32_t id : tok->stop_ids()) {
    LL_CHECK(id < tok->vocab_size(), "{}: eos token id {} is out of range (vocabulary of {})",
             gen_path.string(), id, tok->vocab_size());
  }
  for (const auto* ids : {&tok->prefix_ids(), &tok->suffix_ids()}) {
    for (int32_t id : *ids) {
      LL_CHECK(id < tok->vocab_size() && !tok->token_text(id).empty(),
               "{}post_processor: token id {} is not in the vocabulary", tw, id);
    }
  }
  return tok;
}

}  // namespace lite_llama
