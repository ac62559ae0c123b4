// Hand-written tokenizer cases on a tiny vocabulary built in memory (no model file needed):
// BOS/EOS handling, special-token parsing on and off, merge order, GGUF metadata errors, the
// streaming detokenizer and the UTF-8 helpers.
#include <gtest/gtest.h>

#include <memory>

#include "common/gguf_writer.h"
#include "core/error.h"
#include "io/gguf.h"
#include "tokenizer/bpe.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

using namespace lite_llama;
using lite_llama::testing::GgufValue;
using lite_llama::testing::GgufWriter;

namespace {

// 256 byte symbols, then a few merged tokens, then specials.
struct TinyVocab {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<std::string> merges = {"Ġ t", "h e", "Ġt he", "Ġ Ġ", "1 2"};
  int32_t bos = -1, eos = -1, im_start = -1, im_prefix = -1, user = -1;

  TinyVocab() {
    for (const auto& s : unicode::byte_to_symbol()) add(s, 1);
    for (const char* t : {"Ġt", "he", "Ġthe", "ĠĠ", "12"}) add(t, 1);
    bos = add("<s>", 3);
    eos = add("</s>", 3);
    im_start = add("<|im_start|>", 3);
    im_prefix = add("<|im", 3);  // a prefix of <|im_start|>: longest match must win
    user = add("<user>", 4);
  }
  int32_t add(const std::string& t, int32_t type) {
    tokens.push_back(t);
    types.push_back(type);
    return static_cast<int32_t>(tokens.size() - 1);
  }
  int32_t id(const std::string& t) const {
    for (size_t i = 0; i < tokens.size(); ++i)
      if (tokens[i] == t) return static_cast<int32_t>(i);
    return -1;
  }
  int32_t byte(char c) const { return id(unicode::byte_to_symbol()[static_cast<uint8_t>(c)]); }

  GgufWriter writer(const std::string& pre = "smollm", bool add_bos = true) const {
    GgufWriter w;
    w.add("tokenizer.ggml.model", GgufValue::str("gpt2"));
    w.add("tokenizer.ggml.pre", GgufValue::str(pre));
    w.add("tokenizer.ggml.tokens", GgufValue::strings(tokens));
    w.add("tokenizer.ggml.token_type", GgufValue::array_of(types));
    w.add("tokenizer.ggml.merges", GgufValue::strings(merges));
    w.add("tokenizer.ggml.bos_token_id", GgufValue::u32(static_cast<uint32_t>(bos)));
    w.add("tokenizer.ggml.eos_token_id", GgufValue::u32(static_cast<uint32_t>(eos)));
    w.add("tokenizer.ggml.eot_token_id", GgufValue::u32(static_cast<uint32_t>(eos)));
    w.add("tokenizer.ggml.add_bos_token", GgufValue::boolean(add_bos));
    return w;
  }
};

struct Loaded {
  std::vector<uint8_t> bytes;
  std::unique_ptr<gguf::File> file;
  std::unique_ptr<Tokenizer> tok;
};

Loaded load(const GgufWriter& w, const TokenizerOptions& opts = {}) {
  Loaded l;
  l.bytes = w.bytes();
  l.file = gguf::File::parse(l.bytes.data(), l.bytes.size(), "tiny.gguf");
  l.tok = Tokenizer::from_gguf(*l.file, opts);
  return l;
}

// The message of the Error that loading `w` throws ("" when it loads).
std::string load_error(const GgufWriter& w) {
  try {
    load(w);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::vector<std::string> pieces(const std::string& pre, std::string_view text) {
  auto pt = PreTokenizer::create(pre);
  std::vector<std::string_view> views;
  pt->split(text, views);
  return {views.begin(), views.end()};
}

}  // namespace

TEST(Tokenizer, MergesLowestRankFirst) {
  TinyVocab v;
  auto l = load(v.writer());
  EXPECT_EQ(l.tok->encode(" the", false, true), std::vector<int32_t>{v.id("Ġthe")});
  EXPECT_EQ(l.tok->encode("he the", false, true),
            (std::vector<int32_t>{v.id("he"), v.id("Ġthe")}));
  // smollm splits digits one by one, so "12" is never merged.
  EXPECT_EQ(l.tok->encode("12", false, true), (std::vector<int32_t>{v.byte('1'), v.byte('2')}));
  auto gpt2 = load(v.writer("gpt2"));
  EXPECT_EQ(gpt2.tok->encode("12", false, true), std::vector<int32_t>{v.id("12")});
}

TEST(Tokenizer, BosOnlyWhenAskedAndEnabled) {
  TinyVocab v;
  auto with = load(v.writer("smollm", true));
  EXPECT_TRUE(with.tok->add_bos());
  EXPECT_EQ(with.tok->encode("he", true, true), (std::vector<int32_t>{v.bos, v.id("he")}));
  EXPECT_EQ(with.tok->encode("he", false, true), std::vector<int32_t>{v.id("he")});
  EXPECT_EQ(with.tok->encode("", true, true), std::vector<int32_t>{v.bos});
  auto without = load(v.writer("smollm", false));
  EXPECT_FALSE(without.tok->add_bos());
  EXPECT_EQ(without.tok->encode("he", true, true), std::vector<int32_t>{v.id("he")});
}

// tokenizer.ggml.add_eos_token: add_special appends EOS after the text, as llama.cpp does.
TEST(Tokenizer, EosOnlyWhenAskedAndEnabled) {
  TinyVocab v;
  auto w = v.writer("smollm", true);
  w.add("tokenizer.ggml.add_eos_token", GgufValue::boolean(true));
  auto with = load(w);
  EXPECT_EQ(with.tok->encode("he", true, true), (std::vector<int32_t>{v.bos, v.id("he"), v.eos}));
  EXPECT_EQ(with.tok->encode("<|im_start|>he", true, true),
            (std::vector<int32_t>{v.bos, v.im_start, v.id("he"), v.eos}));
  EXPECT_EQ(with.tok->encode("he", false, true), std::vector<int32_t>{v.id("he")});
  EXPECT_EQ(with.tok->encode("", true, true), (std::vector<int32_t>{v.bos, v.eos}));
  auto off = v.writer("smollm", false);
  off.add("tokenizer.ggml.add_eos_token", GgufValue::boolean(false));
  EXPECT_EQ(load(off).tok->encode("he", true, true), std::vector<int32_t>{v.id("he")});
  // Missing key: no EOS (llama.cpp's default for BPE vocabularies).
  EXPECT_EQ(load(v.writer("smollm", false)).tok->encode("he", true, true),
            std::vector<int32_t>{v.id("he")});

  GgufWriter no_eos;
  no_eos.add("tokenizer.ggml.model", GgufValue::str("gpt2"));
  no_eos.add("tokenizer.ggml.tokens", GgufValue::strings(v.tokens));
  no_eos.add("tokenizer.ggml.token_type", GgufValue::array_of(v.types));
  no_eos.add("tokenizer.ggml.merges", GgufValue::strings(v.merges));
  no_eos.add("tokenizer.ggml.add_eos_token", GgufValue::boolean(true));
  const std::string err = load_error(no_eos);
  EXPECT_NE(err.find("tokenizer.ggml.add_eos_token"), std::string::npos) << err;
}

TEST(Tokenizer, SpecialTokensParsedOnlyWhenAsked) {
  TinyVocab v;
  auto l = load(v.writer());
  const auto& tok = *l.tok;
  EXPECT_EQ(tok.encode("<|im_start|>he", false, true),
            (std::vector<int32_t>{v.im_start, v.id("he")}));
  EXPECT_EQ(tok.encode("<|imhe", false, true), (std::vector<int32_t>{v.im_prefix, v.id("he")}));
  EXPECT_EQ(tok.encode("<user></s>", false, true), (std::vector<int32_t>{v.user, v.eos}));
  // Text around a special token is pre-tokenised on its own: no piece spans the token.
  EXPECT_EQ(tok.encode(" <s> the", false, true),
            (std::vector<int32_t>{v.byte(' '), v.bos, v.id("Ġthe")}));

  const auto plain = tok.encode("<|im_start|>he", false, false);
  for (int32_t id : plain) EXPECT_FALSE(tok.is_special(id)) << id;
  EXPECT_EQ(tok.decode(plain), "<|im_start|>he");
  EXPECT_EQ(plain.front(), v.byte('<'));
}

// A user-defined token (GGUF token_type 4, what convert_hf_to_gguf.py writes for an added token
// with special=false, e.g. Qwen3's <think>) matches even without parse_special: llama.cpp's
// tokenizer_st_partition skips only control/unknown tokens then, and HF's tokenizers gives
// '<think>hi<|im_end|>' with encode_special_tokens=True as ['<think>', 'hi', '<', '|', ...].
TEST(Tokenizer, UserDefinedTokensMatchWithoutParseSpecial) {
  TinyVocab v;
  auto l = load(v.writer());
  EXPECT_EQ(l.tok->encode("<user>he</s>", false, false),
            (std::vector<int32_t>{v.user, v.id("he"), v.byte('<'), v.byte('/'), v.byte('s'),
                                  v.byte('>')}));
}

TEST(Tokenizer, DecodeAndSpecialQueries) {
  TinyVocab v;
  auto l = load(v.writer());
  const auto& tok = *l.tok;
  EXPECT_EQ(tok.vocab_size(), static_cast<int32_t>(v.tokens.size()));
  EXPECT_EQ(tok.token_text(v.id("Ġthe")), "Ġthe");
  EXPECT_EQ(tok.token_bytes(v.id("Ġthe")), " the");
  EXPECT_EQ(tok.token_bytes(v.im_start), "<|im_start|>");
  EXPECT_EQ(tok.token_id("Ġthe"), v.id("Ġthe"));
  EXPECT_EQ(tok.token_id(" the"), -1);
  EXPECT_TRUE(tok.is_special(v.user));
  EXPECT_FALSE(tok.is_control(v.user));
  EXPECT_TRUE(tok.is_control(v.eos));
  EXPECT_FALSE(tok.is_special(v.id("he")));
  EXPECT_FALSE(tok.is_special(-1));
  const std::vector<int32_t> ids = {v.bos, v.id("he"), v.user, v.eos};
  EXPECT_EQ(tok.decode(ids), "<s>he<user></s>");
  EXPECT_EQ(tok.decode(ids, true), "he<user>");
  EXPECT_EQ(tok.stop_ids(), std::vector<int32_t>{v.eos});  // eos == eot: listed once
  EXPECT_EQ(tok.bos_id(), v.bos);
  EXPECT_EQ(tok.pad_id(), -1);
  EXPECT_THROW(tok.decode({static_cast<int32_t>(v.tokens.size())}), Error);
  EXPECT_THROW(tok.token_text(-1), Error);
}

TEST(Tokenizer, ArbitraryBytesRoundTrip) {
  TinyVocab v;
  auto l = load(v.writer());
  std::string s;
  for (int b = 0; b < 256; ++b) s += static_cast<char>(b);
  s += "\xF0\x9F\x98";  // cut-off emoji
  s += " the \xC3( <s>";
  EXPECT_EQ(l.tok->decode(l.tok->encode(s, false, false)), s);
  EXPECT_EQ(l.tok->decode(l.tok->encode(s, false, true)), s);
}

TEST(Tokenizer, MetadataErrorsNameTheKey) {
  TinyVocab v;
  auto unknown_pre = load_error(v.writer("no-such-pre"));
  EXPECT_NE(unknown_pre.find("tokenizer.ggml.pre"), std::string::npos) << unknown_pre;
  EXPECT_NE(unknown_pre.find("no-such-pre"), std::string::npos) << unknown_pre;
  EXPECT_NE(unknown_pre.find("smollm"), std::string::npos) << unknown_pre;
  EXPECT_NE(unknown_pre.find("llama-bpe"), std::string::npos) << unknown_pre;

  GgufWriter spm;
  spm.add("tokenizer.ggml.model", GgufValue::str("llama"));
  spm.add("tokenizer.ggml.tokens", GgufValue::strings(v.tokens));
  auto model_err = load_error(spm);
  EXPECT_NE(model_err.find("tokenizer.ggml.model"), std::string::npos) << model_err;
  EXPECT_NE(model_err.find("'llama'"), std::string::npos) << model_err;

  GgufWriter no_tokens;
  no_tokens.add("tokenizer.ggml.model", GgufValue::str("gpt2"));
  auto tokens_err = load_error(no_tokens);
  EXPECT_NE(tokens_err.find("tokenizer.ggml.tokens"), std::string::npos) << tokens_err;

  TinyVocab bad_merge;
  bad_merge.merges.push_back("Ġthe zzz");
  auto merge_err = load_error(bad_merge.writer());
  EXPECT_NE(merge_err.find("tokenizer.ggml.merges"), std::string::npos) << merge_err;
  EXPECT_NE(merge_err.find("zzz"), std::string::npos) << merge_err;

  TinyVocab bad_bos;
  bad_bos.bos = 100000;
  auto bos_err = load_error(bad_bos.writer());
  EXPECT_NE(bos_err.find("tokenizer.ggml.bos_token_id"), std::string::npos) << bos_err;

  TinyVocab bad_types;
  bad_types.types.pop_back();
  auto types_err = load_error(bad_types.writer());
  EXPECT_NE(types_err.find("tokenizer.ggml.token_type"), std::string::npos) << types_err;
}

TEST(Tokenizer, PreOverride) {
  TinyVocab v;
  auto l = load(v.writer("smollm"), TokenizerOptions{"gpt2"});
  EXPECT_EQ(l.tok->encode("12", false, true), std::vector<int32_t>{v.id("12")});
  EXPECT_THROW(load(v.writer("smollm"), TokenizerOptions{"nope"}), Error);
}

TEST(PreTokenizer, SplitsLikeHf) {
  EXPECT_EQ(pieces("gpt2", "Hello world's  end 123!!"),
            (std::vector<std::string>{"Hello", " world", "'s", " ", " end", " 123", "!!"}));
  EXPECT_EQ(pieces("smollm", "a  12"), (std::vector<std::string>{"a", "  ", "1", "2"}));
  EXPECT_EQ(pieces("llama-bpe", "I'M 12345\n\n x"),
            (std::vector<std::string>{"I", "'M", " ", "123", "45", "\n\n", " x"}));
  EXPECT_EQ(pieces("qwen2", "x=123"), (std::vector<std::string>{"x", "=", "1", "2", "3"}));
  // Invalid UTF-8 matches no pattern but still comes out as a piece of its own.
  EXPECT_EQ(pieces("gpt2", "ab\xFF" "cd"), (std::vector<std::string>{"ab", "\xFF", "cd"}));
  EXPECT_TRUE(pieces("gpt2", "").empty());
}

TEST(PreTokenizer, LongRunsDoNotOverflow) {
  const std::string spaces(200000, ' ');
  EXPECT_EQ(pieces("gpt2", spaces).size(), 1u);
  EXPECT_EQ(pieces("llama-bpe", spaces + "x").size(), 2u);
  const std::string digits(100000, '7');
  EXPECT_EQ(pieces("smollm", digits).size(), digits.size());
}

TEST(StreamingDetokenizer, NeverSplitsACharacter) {
  TinyVocab v;
  auto l = load(v.writer());
  const std::string emoji = "\xF0\x9F\x98\x80";  // U+1F600
  StreamingDetokenizer d(*l.tok);
  std::string got;
  for (size_t i = 0; i < emoji.size(); ++i) {
    const std::string out = d.push(v.byte(emoji[i]));
    if (i + 1 < emoji.size()) {
      EXPECT_EQ(out, "") << i;
    }
    got += out;
  }
  EXPECT_EQ(got, emoji);
  EXPECT_EQ(d.flush(), "");
}

TEST(StreamingDetokenizer, SkipsControlAndReplacesInvalid) {
  TinyVocab v;
  auto l = load(v.writer());
  StreamingDetokenizer d(*l.tok);
  EXPECT_EQ(d.push(v.eos), "");
  EXPECT_EQ(d.push(v.user), "<user>");
  EXPECT_EQ(d.push(v.byte('\xE4')), "");
  EXPECT_EQ(d.push(v.byte('\xB8')), "");
  EXPECT_EQ(d.flush(), "\xEF\xBF\xBD");  // one U+FFFD for the unfinished sequence
  // A byte that can never start a character is replaced at once, not held back.
  EXPECT_EQ(d.push(v.byte('\xFF')), "\xEF\xBF\xBD");
  StreamingDetokenizer keep(*l.tok, false);
  EXPECT_EQ(keep.push(v.eos), "</s>");
}

TEST(Unicode, Helpers) {
  using namespace unicode;
  EXPECT_EQ(complete_prefix_len("abc"), 3u);
  EXPECT_EQ(complete_prefix_len("ab\xE4\xB8"), 2u);
  EXPECT_EQ(complete_prefix_len("ab\xE4\xB8\xAD"), 5u);
  EXPECT_EQ(complete_prefix_len("\xF0\x9F\x98"), 0u);
  EXPECT_EQ(complete_prefix_len("a\x80"), 2u);      // stray continuation: not completable
  EXPECT_EQ(complete_prefix_len("a\xE4" "b"), 3u);  // broken sequence: not completable
  EXPECT_EQ(complete_prefix_len("a\xED\xA0"), 3u);  // surrogate prefix: never valid
  EXPECT_EQ(sanitize_utf8("a\xE4\xB8" "b\xFF"), "a\xEF\xBF\xBD" "b\xEF\xBF\xBD");
  EXPECT_EQ(sanitize_utf8("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_TRUE(is_valid_utf8("h\xC3\xA9llo \xF0\x9F\x98\x80"));
  EXPECT_FALSE(is_valid_utf8("\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_EQ(byte_to_symbol()[' '], "Ġ");
  EXPECT_EQ(byte_to_symbol()['\n'], "Ċ");
  EXPECT_EQ(byte_to_symbol()['a'], "a");
  EXPECT_EQ(symbols_to_bytes("ĠhelloĊ"), " hello\n");
  uint32_t cp = 0;
  EXPECT_EQ(decode_utf8("\xE2\x82\xAC", 0, cp), 3);
  EXPECT_EQ(cp, 0x20ACu);
}

TEST(BpeModel, PieceCacheKeepsModelsApart) {
  // The per-thread piece cache is keyed by the model: two models with different merges, used in
  // turn on one thread (and one freed, another built in its place), each give their own ids.
  std::vector<std::string> syms;
  for (const auto& s : unicode::byte_to_symbol()) syms.push_back(s);
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> t = syms;
    t.insert(t.end(), extra.begin(), extra.end());
    return t;
  };
  const BpeModel merged(with({"ab"}), std::vector<std::string>{"a b"}, "merges");
  auto plain = std::make_unique<BpeModel>(with({}), std::vector<std::string>{}, "merges");
  const int32_t a = merged.byte_token('a'), b = merged.byte_token('b'), ab = merged.find("ab");
  for (int round = 0; round < 3; ++round) {
    std::vector<int32_t> m, p;
    merged.encode_piece("ab", false, m);
    plain->encode_piece("ab", false, p);
    EXPECT_EQ(m, std::vector<int32_t>({ab})) << round;
    EXPECT_EQ(p, std::vector<int32_t>({a, b})) << round;
    plain = std::make_unique<BpeModel>(with({}), std::vector<std::string>{}, "merges");
  }
  // A piece too long to cache and a repeated one give the same ids as the first time.
  const std::string lng(200, 'a');
  std::vector<int32_t> x, y;
  merged.encode_piece(lng, false, x);
  merged.encode_piece(lng, false, y);
  EXPECT_EQ(x, y);
  EXPECT_EQ(x.size(), 200u);
}
