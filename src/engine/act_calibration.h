// What --dtype auto resolves to on a GPU: fp16 (10-bit mantissa, closer to the fp32 reference
// than bf16's 7 bits) where the model's activations fit fp16's range with room to spare,
// measured by one forward of a calibration text; bf16 where they do not.
#pragma once
#include "model/decoder.h"
#include "tokenizer/tokenizer.h"

namespace lite_llama {

// fp16 is kept while the calibration's largest |activation| stays below this: 1/8 of fp16's
// largest finite value, room for prompts that push activations past the calibration text's.
constexpr double kFp16SafeRange = 65504.0 / 8;

// The largest |value| one forward of the calibration text writes into the decoder's 16-bit
// activations (+inf where any is not finite). Uses KV slots 0.. and request row 0, which the
// engine has not handed out yet.
double calibration_activation_range(Decoder& decoder, const Tokenizer& tokenizer);

}  // namespace lite_llama
