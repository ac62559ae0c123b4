#include "server/request_timing.h"

#include <fmt/format.h>

namespace lite_llama::server {

std::string timing_line(const SessionStamps& s, const GenerationStamps& g, const RequestStream::Times& e) {
  using T = TimingClock::time_point;
  // In the order they happen on the way to the first token; the head's write (replied) runs
  // beside the engine and is reported on its own.
  const std::pair<const char*, T> stages[] = {
      {"read", s.body},           {"worker", s.worker},     {"parse", g.parsed},
      {"prompt", g.prompt},       {"submit", e.submitted},  {"pickup", e.picked},
      {"add", e.added},           {"wait", e.first_step_begin}, {"step", e.first_step_end},
      {"drain", g.first_token},   {"write", s.first_written}};
  auto us = [](T a, T b) { return std::chrono::duration_cast<std::chrono::microseconds>(b - a).count(); };
  std::string out = "timing us:";
  T prev = s.received;
  for (const auto& [name, t] : stages) {
    if (t == T{}) continue;
    out += fmt::format(" {} {}", name, us(prev, t));
    prev = t;
  }
  if (s.replied != T{} && e.submitted != T{}) out += fmt::format(" (head queued {} after submit)", us(e.submitted, s.replied));
  if (s.first_written != T{}) out += fmt::format(" first-token {}", us(s.received, s.first_written));
  return out;
}

}  // namespace lite_llama::server
