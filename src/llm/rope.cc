#include "llm/rope.h"

#include <algorithm>
#include <cmath>

namespace tunableop::llm {

namespace {

// transformers: 1 / base ** (arange(0, d, 2).float() / d), all in fp32. Following its roundings
// keeps our angles bit-close to the reference's.
std::vector<float> default_inv_freq(int64_t head_dim, double theta) {
  std::vector<float> inv(size_t(head_dim / 2));
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    inv[size_t(i)] = 1.0f / std::pow(float(theta), float(2 * i) / float(head_dim));
  }
  return inv;
}

// Llama 3.1's scaling (_compute_llama3_parameters): wavelengths longer than the original context
// / low_freq_factor are divided by `factor`, shorter than original / high_freq_factor kept, and
// the band between blended smoothly. The tensor arithmetic is fp32 with the Python scalars
// rounded to fp32, the comparisons against them too.
void llama3(const RopeScaling& s, int64_t original, std::vector<float>& inv) {
  const double low_wavelen = double(original) / s.low_freq_factor, high_wavelen = double(original) / s.high_freq_factor;
  const float factor = float(s.factor), low = float(s.low_freq_factor),
              span = float(s.high_freq_factor - s.low_freq_factor);
  for (float& f : inv) {
    const float wavelen = float(2 * M_PI) / f;
    const float scaled = wavelen > float(low_wavelen) ? f / factor : f;
    const bool medium = !(wavelen < float(high_wavelen)) && !(wavelen > float(low_wavelen));
    if (medium) {
      const float smooth = (float(original) / wavelen - low) / span;
      f = (1.0f - smooth) * scaled / factor + smooth * scaled;
    } else {
      f = scaled;
    }
  }
}

// YaRN (_compute_yarn_parameters, transformers 5): frequencies blended between the original
// (extrapolation) and divided by `factor` (interpolation) along a ramp over the dimensions whose
// rotations at the original context length lie between beta_slow and beta_fast. Returns the
// attention factor.
float yarn(const RopeScaling& s, int64_t original, int64_t head_dim, double theta, std::vector<float>& inv) {
  const double dim = double(head_dim);
  auto correction_dim = [&](double rotations) {
    return dim * std::log(double(original) / (rotations * 2 * M_PI)) / (2 * std::log(theta));
  };
  double low = correction_dim(s.beta_fast), high = correction_dim(s.beta_slow);
  if (s.truncate) low = std::floor(low), high = std::ceil(high);
  low = std::max(low, 0.0), high = std::min(high, dim - 1);
  if (low == high) high += 0.001;  // transformers: "prevent singularity"
  const float factor = float(s.factor);
  for (size_t i = 0; i < inv.size(); ++i) {
    const float pos_freq = std::pow(float(theta), float(2 * i) / float(head_dim));
    const float extrapolation = 1.0f / pos_freq, interpolation = 1.0f / (factor * pos_freq);
    const float ramp = std::clamp((float(i) - float(low)) / float(high - low), 0.0f, 1.0f);
    const float extrapolation_factor = 1.0f - ramp;
    inv[i] = interpolation * (1.0f - extrapolation_factor) + extrapolation * extrapolation_factor;
  }
  if (s.attention_factor > 0) return float(s.attention_factor);
  auto mscale = [](double scale, double m) { return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; };
  if (s.mscale > 0 && s.mscale_all_dim > 0)
    return float(mscale(s.factor, s.mscale) / mscale(s.factor, s.mscale_all_dim));
  return float(mscale(s.factor, 1.0));
}

RopeTable table(const RopeFrequencies& f, int64_t max_pos) {
  RopeTable t;
  t.half = int64_t(f.inv_freq.size());
  t.cos.resize(size_t(max_pos * t.half));
  t.sin.resize(size_t(max_pos * t.half));
  for (int64_t p = 0; p < max_pos; ++p) {
    for (int64_t i = 0; i < t.half; ++i) {
      // The angle is an fp32 product, as transformers' outer product; cos and sin are scaled in fp32.
      const float angle = float(p) * f.inv_freq[size_t(i)];
      float c = std::cos(angle), s = std::sin(angle);
      if (f.attention_factor != 1.f) c *= f.attention_factor, s *= f.attention_factor;
      t.cos[size_t(p * t.half + i)] = c;
      t.sin[size_t(p * t.half + i)] = s;
    }
  }
  return t;
}

}  // namespace

RopeFrequencies rope_frequencies(const ModelConfig& c) {
  RopeFrequencies f;
  f.inv_freq = default_inv_freq(c.head_dim, c.rope_theta);
  const RopeScaling& s = c.rope;
  const int64_t original =
      s.original_max_position_embeddings > 0 ? s.original_max_position_embeddings : c.max_position_embeddings;
  switch (s.type) {
    case RopeType::kDefault:
    case RopeType::kDynamic: break;  // dynamic: the default base up to max_position_embeddings
    case RopeType::kLinear: {
      const float factor = float(s.factor);
      for (float& x : f.inv_freq) x /= factor;
      break;
    }
    case RopeType::kLlama3: llama3(s, original, f.inv_freq); break;
    case RopeType::kYarn: f.attention_factor = yarn(s, original, c.head_dim, c.rope_theta, f.inv_freq); break;
  }
  return f;
}

RopeTable make_rope_table(int64_t head_dim, double theta, int64_t max_pos) {
  RopeFrequencies f;
  f.inv_freq = default_inv_freq(head_dim, theta);
  return table(f, max_pos);
}

RopeTable make_rope_table(const ModelConfig& c, int64_t max_pos) { return table(rope_frequencies(c), max_pos); }

Status check_rope_positions(const ModelConfig& c, int64_t max_seq, const std::string& source) {
  if (c.rope.type == RopeType::kDynamic && max_seq > c.max_position_embeddings) {
    return Status::unsupported(source + ": rope_type \"dynamic\" rescales RoPE past max_position_embeddings (" +
                               std::to_string(c.max_position_embeddings) + ") by the running sequence length, " +
                               "which the engine does not do: keep the KV cache at most that long (got " +
                               std::to_string(max_seq) + " positions)");
  }
  return Status::ok();
}

}  // namespace tunableop::llm
