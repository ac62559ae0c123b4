// Malformed option values of the CLI: one line on stderr, exit code 2, before any generation.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>

namespace fs = std::filesystem;

namespace {

std::string model() { return std::string(LL_SOURCE_DIR) + "/tests/fixtures/models/llama"; }

struct CliRun {
  int rc = -1;
  std::string err;
};

// `<env> lite-llama <cmd> -q --device cpu -t 1 -m <tiny model> <args>`: exit code and stderr.
CliRun run(const std::string& cmd, const std::string& args, const std::string& env = "") {
  const fs::path err = fs::temp_directory_path() / ("ll_cli_args_" + std::to_string(getpid()) + ".err");
  const std::string line = env + " '" + LL_CLI_PATH + "' " + cmd + " -q --device cpu -t 1 -m '" + model() +
                           "' " + args + " >/dev/null 2>'" + err.string() + "'";
  const int rc = std::system(line.c_str());
  CliRun r;
  r.rc = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  std::ifstream in(err);
  r.err.assign(std::istreambuf_iterator<char>(in), {});
  fs::remove(err);
  return r;
}

}  // namespace

// CLI11 turns an empty value into 0: `--temperature ''` decoded greedily and `--top-k ''`
// turned top-k off without a word.
TEST(CliArgs, EmptyNumberIsAnError) {
  const char* generate[] = {"--temperature", "--top-k", "--top-p", "--min-p", "--presence-penalty",
                            "--frequency-penalty", "--min-tokens"};
  for (const char* flag : generate) {
    const CliRun r = run("generate", std::string("-p hi -n 2 ") + flag + " ''");
    EXPECT_EQ(r.rc, 2) << flag << ": " << r.err;
    EXPECT_NE(r.err.find("empty value"), std::string::npos) << flag << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << flag << ": " << r.err;
  }
  const CliRun b = run("bench", "--batch 1 --prompt-len 2 --gen-len 2 --runs 1 --warmup ''");
  EXPECT_EQ(b.rc, 2) << b.err;
  EXPECT_NE(b.err.find("--warmup: empty value"), std::string::npos) << b.err;
  // A value that is there still works.
  const CliRun ok = run("generate", "-p hi -n 2 --temperature 0 --top-k 5");
  EXPECT_EQ(ok.rc, 0) << ok.err;
}

// `score --tokens` with no sequence printed "nll": null and exited 0; with an empty one and
// --dump-logits it failed on the dump's rows ("vector::_M_default_append").
TEST(CliArgs, ScoreNeedsSequencesOfTwoTokens) {
  const fs::path dir = fs::temp_directory_path() / ("ll_cli_score_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const auto write = [&](const char* name, const char* text) {
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  };
  const std::string none = write("none.json", "[]"), empty = write("empty.json", "[[1, 2, 3], []]");
  const std::string dump = (dir / "logits.bin").string();
  const CliRun a = run("score", "--tokens '" + none + "'");
  EXPECT_EQ(a.rc, 2) << a.err;
  EXPECT_NE(a.err.find("holds no sequence"), std::string::npos) << a.err;
  const CliRun b = run("score", "--tokens '" + empty + "' --dump-logits '" + dump + "'");
  EXPECT_EQ(b.rc, 2) << b.err;
  EXPECT_NE(b.err.find("sequence 1 needs at least 2 tokens"), std::string::npos) << b.err;
  EXPECT_EQ(std::count(b.err.begin(), b.err.end(), '\n'), 1) << b.err;
  fs::remove_all(dir);
}

// --system without --chat was accepted and dropped.
TEST(CliArgs, SystemNeedsChat) {
  const CliRun r = run("generate", "-p hi -n 2 --system 'be brief'");
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("--chat"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// The LITE_LLAMA_* tuning variables: atoi read "abc" as 0 without a word, and
// LITE_LLAMA_CPU_Q8=0 turned int8 activations on.
TEST(CliArgs, MalformedTuningVariableIsAnError) {
  const std::pair<const char*, const char*> bad[] = {
      {"LITE_LLAMA_DECODE_STAGES=abc", "LITE_LLAMA_DECODE_STAGES must be an integer, got 'abc'"},
      {"LITE_LLAMA_GEMV_MAX=4x", "LITE_LLAMA_GEMV_MAX must be an integer, got '4x'"},
      {"LITE_LLAMA_GEMV_MAX=", "LITE_LLAMA_GEMV_MAX must be an integer, got ''"},
      {"LITE_LLAMA_CPU_Q8=yes", "LITE_LLAMA_CPU_Q8 must be 0 or 1, got 'yes'"},
      {"LITE_LLAMA_PDL=off", "LITE_LLAMA_PDL must be 0 or 1, got 'off'"}};
  for (const auto& [env, message] : bad)
    for (const char* cmd : {"info", "generate -p hi -n 2"}) {
      const CliRun r = run(cmd, "", env);
      EXPECT_EQ(r.rc, 2) << env << " " << cmd << ": " << r.err;
      EXPECT_NE(r.err.find(message), std::string::npos) << env << " " << cmd << ": " << r.err;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << env << " " << cmd << ": " << r.err;
    }
  const std::string info = std::string("'") + LL_CLI_PATH + "' info --device cpu -m '" + model() + "'";
  const auto backend = [&](const char* env) {
    std::string out;
    if (FILE* f = popen((std::string(env) + " " + info + " 2>/dev/null").c_str(), "r")) {
      char buf[4096];
      for (size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
      pclose(f);
    }
    return out;
  };
  EXPECT_EQ(backend("LITE_LLAMA_CPU_Q8=0").find("int8 activations"), std::string::npos);
  EXPECT_NE(backend("LITE_LLAMA_CPU_Q8=1").find("int8 activations"), std::string::npos);
}

// chat: a CRLF "/exit\r" was sent to the model as a message, and so was a line of spaces. The
// prompt "> " is written once per line read: a blank line and /exit read, nothing after them.
TEST(CliArgs, ChatTakesCommandsFromCrlfInputAndSkipsBlankLines) {
  const fs::path in = fs::temp_directory_path() / ("ll_cli_chat_" + std::to_string(getpid()) + ".txt");
  std::ofstream(in) << "   \r\n/exit\r\nhello\r\n";
  const CliRun r = run("chat", "-n 2 < '" + in.string() + "'");
  fs::remove(in);
  EXPECT_EQ(r.rc, 0) << r.err;
  size_t prompts = 0;
  for (size_t p = r.err.find("> "); p != std::string::npos; p = r.err.find("> ", p + 2)) ++prompts;
  EXPECT_EQ(prompts, 2u) << r.err;
}
