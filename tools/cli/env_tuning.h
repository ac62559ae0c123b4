// The documented LITE_LLAMA_* tuning and debugging variables (README "Tuning"), read here once
// and nowhere below tools/: the backends take them as typed BackendOptions fields.
#pragma once
#include "lite_llama/backend_options.h"

namespace lite_llama::cli {

// Overrides the fields of o whose variable is set.
void apply_env_tuning(BackendOptions& o);

}  // namespace lite_llama::cli
