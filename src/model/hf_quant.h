// Quantised linear layers of HF checkpoints (quantization_config) -> host tensors in the GPU's GQ
// layout (core/gq.h), exactly where the format allows:
//   GPTQ  qweight int32 [K/8, N] (k = 8i + j at bits 4j), qzeros int32 [K/G, N/8] (v1 "gptq"
//         stores zero - 1), scales [K/G, N], g_idx [K]: w = s (q - z). With act-order (g_idx not
//         k / G) groups are not contiguous along k, so the layer is dequantised to BF16 instead.
//   AWQ   qweight int32 [K, N/8], qzeros [K/G, N/8] (column 8j + c at nibble [0,4,1,5,2,6,3,7][c]),
//         scales [K/G, N]: w = s (q - z).
//   FP8   weight F8_E4M3 [N, K] with weight_scale_inv [N/128, K/128] (128 x 128 blocks) or
//         weight_scale (per tensor or per row): w = e4m3 x scale.
#pragma once
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/model_config.h"

namespace lite_llama {

namespace safetensors {
class Archive;
}

// The layer `prefix` (e.g. "model.layers.0.self_attn.q_proj") as an [N, K] host tensor owned by
// a buffer appended to `keep`; false when the archive has no quantised tensors under that prefix.
// Throws a one-line error naming the tensor for wrong dtypes or packed shapes.
bool load_quantized_linear(const safetensors::Archive& a, const QuantConfig& q, const std::string& prefix,
                           std::vector<Buffer>& keep, Tensor& out);

}  // namespace lite_llama
