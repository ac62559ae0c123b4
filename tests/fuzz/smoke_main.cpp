// A short fuzz pass without libFuzzer, for CI (built with the normal toolchain): the target's
// LLVMFuzzerTestOneInput over its seed corpus, then over seeded random mutations of the seeds
// (byte flips, inserts, deletes, repeats that make inputs deep or huge, dictionary words) until
// the time is up. A crash or an escaping exception fails the run. scripts/fuzz (clang,
// coverage-guided, ASan + UBSan) is the real fuzzer; this only keeps its targets honest in CI.
//
//   fuzz_smoke_<target> SECONDS [-dict=FILE] CORPUS_DIR_OR_FILE...
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace fs = std::filesystem;

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// libFuzzer dictionary lines: "word" with \\xNN, \\\\ and \\" escapes.
std::vector<std::string> read_dict(const fs::path& p) {
  std::vector<std::string> words;
  std::ifstream f(p);
  for (std::string line; std::getline(f, line);) {
    const size_t a = line.find('"'), b = line.rfind('"');
    if (a == std::string::npos || b <= a) continue;
    std::string w;
    for (size_t i = a + 1; i < b; ++i) {
      if (line[i] == '\\' && i + 1 < b) {
        if (line[i + 1] == 'x' && i + 3 < b) {
          w += char(std::strtol(line.substr(i + 2, 2).c_str(), nullptr, 16));
          i += 3;
        } else {
          w += line[++i];
        }
      } else {
        w += line[i];
      }
    }
    words.push_back(w);
  }
  return words;
}

// The input being run, written to ./fuzz-smoke-crash when it crashes (a stack overflow included:
// the handler runs on its own stack), to be replayed under scripts/fuzz --replay.
const std::string* g_current = nullptr;

void on_crash(int sig) {
  if (g_current) {
    const int fd = ::open("fuzz-smoke-crash", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ssize_t ignored = ::write(fd, g_current->data(), g_current->size());
      (void)ignored;
      ::close(fd);
    }
    const char msg[] = "fuzz smoke: crashed; the input is in ./fuzz-smoke-crash\n";
    ssize_t ignored = ::write(2, msg, sizeof(msg) - 1);
    (void)ignored;
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void catch_crashes() {
  static std::vector<char> alt(1 << 16);
  stack_t ss{};
  ss.ss_sp = alt.data();
  ss.ss_size = alt.size();
  ::sigaltstack(&ss, nullptr);
  struct sigaction sa{};
  sa.sa_handler = on_crash;
  sa.sa_flags = SA_ONSTACK;
  for (int sig : {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL}) ::sigaction(sig, &sa, nullptr);
}

void run(const std::string& in) {
  g_current = &in;
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(in.data()), in.size());
  g_current = nullptr;
}

std::string mutate(std::string s, const std::vector<std::string>& seeds, const std::vector<std::string>& dict,
                   std::mt19937_64& rng) {
  const int n = 1 + int(rng() % 4);
  for (int k = 0; k < n; ++k) {
    const size_t pos = s.empty() ? 0 : rng() % (s.size() + 1);
    switch (rng() % 7) {
      case 0:
        if (!s.empty()) s[pos % s.size()] ^= char(1u << (rng() % 8));
        break;
      case 1: s.insert(pos, 1, char(rng() % 256)); break;
      case 2:
        if (!s.empty()) s.erase(pos % s.size(), 1 + rng() % 8);
        break;
      case 3: {  // repeat a slice: deep nesting, huge inputs
        if (s.empty()) break;
        const size_t at = rng() % s.size(), len = 1 + rng() % std::min<size_t>(16, s.size() - at);
        const std::string slice = s.substr(at, len);
        std::string rep;
        for (size_t r = 0, times = 1 + rng() % 300; r < times && rep.size() < 4000; ++r) rep += slice;
        s.insert(at, rep);
        break;
      }
      case 4:
        if (!dict.empty()) s.insert(pos, dict[rng() % dict.size()]);
        break;
      case 5: {  // splice with another seed
        const std::string& o = seeds[rng() % seeds.size()];
        if (!o.empty()) s = s.substr(0, pos) + o.substr(rng() % o.size());
        break;
      }
      default:
        if (!s.empty()) s[pos % s.size()] = char("{}[]\":,()*+?|\\0-9aZ#x "[rng() % 23]);
    }
  }
  if (s.size() > 16384) s.resize(16384);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s SECONDS [-dict=FILE] CORPUS...\n", argv[0]);
    return 2;
  }
  const double seconds = std::atof(argv[1]);
  std::vector<std::string> seeds, dict;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("-dict=", 0) == 0) {
      dict = read_dict(a.substr(6));
      continue;
    }
    if (fs::is_directory(a)) {
      for (const auto& e : fs::directory_iterator(a))
        if (e.is_regular_file() && e.path().extension() != ".md") seeds.push_back(read_file(e.path()));
    } else if (fs::exists(a)) {
      seeds.push_back(read_file(a));
    } else {
      std::fprintf(stderr, "%s: no such corpus '%s'\n", argv[0], a.c_str());
      return 2;
    }
  }
  if (seeds.empty()) seeds.push_back("");
  catch_crashes();
  for (const auto& s : seeds) run(s);
  std::mt19937_64 rng(12345);
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  long runs = long(seeds.size());
  while (std::chrono::steady_clock::now() < end) {
    const std::string in = mutate(seeds[rng() % seeds.size()], seeds, dict, rng);
    run(in);
    ++runs;
  }
  std::printf("%s: %ld inputs, no crash\n", argv[0], runs);
  return 0;
}
