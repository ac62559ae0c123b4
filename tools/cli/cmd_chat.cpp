// `lite-llama chat`: interactive multi-turn chat with streaming replies; /exit quits.
// Ctrl-C as in llama.cpp's llama-cli: the first during an answer stops it and returns to the
// prompt; at the prompt, or a second before the answer has stopped, it ends the program with
// status 130 (128 + SIGINT, what a shell reports for a program Ctrl-C killed).
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <utility>

#include "common.h"
#include "core/timer.h"

namespace lite_llama::cli {

namespace {

enum State : int { kLoading, kPrompt, kAnswering };
volatile std::sig_atomic_t g_state = kLoading;
volatile std::sig_atomic_t g_stop_answer = 0;
int g_wake[2] = {-1, -1};  // self-pipe: Ctrl-C at the prompt wakes the poll in read_line

void on_sigint(int) {
  const int saved = errno;
  if (g_state == kAnswering && !g_stop_answer) {
    g_stop_answer = 1;  // the generation loop cancels the request between steps
  } else if (g_state == kPrompt) {
    (void)!write(g_wake[1], "x", 1);
  } else {  // while loading, or a second Ctrl-C before the answer stopped
    (void)!write(STDERR_FILENO, "\n", 1);
    _exit(130);
  }
  errno = saved;
}

void install_sigint_handler() {
  if (g_wake[0] < 0 && pipe(g_wake) != 0) g_wake[0] = g_wake[1] = -1;
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // the self-pipe, not EINTR, interrupts the prompt's read
  sigaction(SIGINT, &sa, nullptr);
}

enum class Read { Line, End, Interrupted };

// One line of stdin (without its newline). Reads the descriptor itself, beside the self-pipe:
// a signal handled on another thread interrupts no read of std::cin.
Read read_line(std::string& line) {
  static std::string buf;
  static bool eof = false;
  for (;;) {
    if (const size_t nl = buf.find('\n'); nl != std::string::npos) {
      line = buf.substr(0, nl);
      buf.erase(0, nl + 1);
      return Read::Line;
    }
    if (eof) {
      if (buf.empty()) return Read::End;
      line = std::move(buf);  // a last line without its newline, as std::getline
      buf.clear();
      return Read::Line;
    }
    pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {g_wake[0], POLLIN, 0}};
    if (poll(fds, g_wake[0] < 0 ? 1 : 2, -1) < 0) {
      if (errno == EINTR) continue;
      return Read::End;
    }
    if (fds[1].revents & POLLIN) return Read::Interrupted;
    if (!(fds[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    char chunk[4096];
    const ssize_t n = read(STDIN_FILENO, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      eof = true;
    else
      buf.append(chunk, size_t(n));
  }
}

struct ChatArgs {
  ModelArgs model;
  SamplingArgs sampling;
  std::string system;
};

ChatMessage message(std::string role, std::string content) {
  ChatMessage m;
  m.role = std::move(role);
  m.content = std::move(content);
  return m;
}

void run_chat(ChatArgs& a) {
  const SamplingParams params = a.sampling.resolve();
  install_sigint_handler();
  auto engine = open_engine(a.model);
  std::vector<ChatMessage> history;
  if (!a.system.empty()) history.push_back(message("system", a.system));
  std::fprintf(stderr,
               "lite-llama chat with %s. Type /exit (or Ctrl-D) to quit, /reset to forget; "
               "Ctrl-C stops an answer.\n",
               engine->info().name.c_str());
  std::string line;
  for (;;) {
    g_state = kPrompt;
    std::fprintf(stderr, "> ");
    std::fflush(stderr);
    const Read got = read_line(line);
    if (got == Read::Interrupted) {
      std::fprintf(stderr, "\n");
      throw ExitStatus{130};
    }
    if (got == Read::End) break;
    if (!line.empty() && line.back() == '\r') line.pop_back();  // CRLF input: "/exit\r" is /exit
    // Commands and blank lines as typed with stray spaces: "/reset " resets, "   " sends nothing.
    const size_t b = line.find_first_not_of(" \t"), e = line.find_last_not_of(" \t");
    const std::string cmd = b == std::string::npos ? std::string() : line.substr(b, e - b + 1);
    if (cmd == "/exit" || cmd == "/quit") break;
    if (cmd == "/reset") {
      history.resize(a.system.empty() ? 0 : 1);
      continue;
    }
    if (cmd.empty()) continue;
    g_stop_answer = 0;
    g_state = kAnswering;  // from here a Ctrl-C stops this answer
    history.push_back(message("user", line));
    std::vector<int32_t> ids = engine->tokenize(engine->apply_chat_template(history, true), false, true);
    int64_t id = 0;
    try {
      id = engine->add_request(std::move(ids), params);
    } catch (const std::exception& e) {
      // e.g. the conversation outgrew the context: say so and let the user go on.
      std::fprintf(stderr, "error: %s (use /reset)\n", e.what());
      history.pop_back();
      continue;
    }
    std::string reply;
    int n = 0;
    bool stopped = false;
    const double t0 = now_ms();
    while (engine->has_unfinished()) {
      if (g_stop_answer && !stopped) {
        engine->cancel(id);
        stopped = true;
      }
      for (const RequestOutput& o : engine->step()) {
        if (o.id != id) continue;
        n += int(o.tokens.size());
        reply += o.text;
        std::fputs(o.text.c_str(), stdout);
        std::fflush(stdout);
      }
    }
    std::printf("\n");
    std::fflush(stdout);
    if (stopped) std::fprintf(stderr, "[stopped]\n");
    if (!a.model.quiet)
      std::fprintf(stderr, "[%d tokens, %.1f tok/s]\n", n, n * 1000.0 / (now_ms() - t0));
    // A stopped answer stays in the conversation as far as it got, as llama-cli keeps it (and
    // the next turn can refer to it); /reset forgets it.
    history.push_back(message("assistant", reply));
  }
}

}  // namespace

void register_chat(CLI::App& app) {
  auto a = std::make_shared<ChatArgs>();
  CLI::App* c = app.add_subcommand("chat", "interactive chat (streaming, multi-turn)");
  add_model_options(c, a->model);
  add_chat_template_option(c, a->model);
  add_sampling_options(c, a->sampling, 512);
  c->add_option("--system", a->system, "system message");
  c->callback([a] { run_chat(*a); });
}

}  // namespace lite_llama::cli
