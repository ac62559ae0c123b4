// Where a generation request's time to its first token goes, stage by stage (--log-timing):
// stamps taken on the way (a clock read each, always), one log line per request when asked.
#pragma once
#include <chrono>
#include <string>

#include "lite_llama/async_engine.h"

namespace lite_llama::server {

using TimingClock = std::chrono::steady_clock;

// Taken by the HTTP session (its strand and the worker thread that handles the request).
struct SessionStamps {
  TimingClock::time_point received;  // the request's first bytes were read
  TimingClock::time_point body;      // the whole request is in; handed to a worker
  TimingClock::time_point worker;    // the worker began handle()
  TimingClock::time_point replied;   // back on the strand: the response head is queued
  TimingClock::time_point first_written;  // the write holding the first token's chunk completed
};

// Taken by start_generation and the Generation (on the worker, then on the strand).
struct GenerationStamps {
  TimingClock::time_point parsed;     // JSON body parsed and validated
  TimingClock::time_point prompt;     // chat template rendered and tokenized
  TimingClock::time_point first_token;  // drain() took the first output carrying a token
};

// "timing us: read 120 worker 15 parse 210 ..." (microseconds between consecutive stages; a
// stage not reached is left out).
std::string timing_line(const SessionStamps& s, const GenerationStamps& g, const RequestStream::Times& e);

}  // namespace lite_llama::server
