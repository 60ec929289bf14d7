// The forward against Hugging Face transformers itself: logits of Qwen3ForCausalLM (fp32, CPU,
// eager attention; torch 2.11, transformers 5.17) on a 1100-token sequence, for weights both
// sides derive from the same integer hash, so no checkpoint file is needed. (How the rotary
// angles round at large positions is checked by RotaryTable in qwen3_model_test.cpp: its effect
// on these logits is below fp32 noise.)
//
// The values below were printed by this script (run where torch and transformers are installed):
//
// import os, sys
// import numpy as np
//
// M = 0xFFFFFFFF
//
// def hash_u32(idx, seed):
//     x = (idx.astype(np.uint64) + np.uint64((seed * 0x9E3779B9) & M)) & np.uint64(M)
//     x ^= x >> np.uint64(16)
//     x = (x * np.uint64(0x7FEB352D)) & np.uint64(M)
//     x ^= x >> np.uint64(15)
//     x = (x * np.uint64(0x846CA68B)) & np.uint64(M)
//     x ^= x >> np.uint64(16)
//     return x
//
// def values(shape, seed, lo, hi):
//     n = int(np.prod(shape))
//     u = hash_u32(np.arange(n, dtype=np.uint64), seed).astype(np.float64) / 4294967296.0
//     return (lo + (hi - lo) * u).astype(np.float32).reshape(shape)
//
// def linear(out, inp, seed):
//     a = 1.5 / np.sqrt(inp)
//     return values((out, inp), seed, -a, a)
//
// import torch, transformers
// from transformers import Qwen3Config, Qwen3ForCausalLM
// print("torch", torch.__version__, "transformers", transformers.__version__, file=sys.stderr)
// torch.set_num_threads(8)
//
// V, H, I, L, NQ, NKV, D = 101, 64, 80, 3, 4, 2, 128
// cfg = Qwen3Config(vocab_size=V, hidden_size=H, intermediate_size=I, num_hidden_layers=L,
//                   num_attention_heads=NQ, num_key_value_heads=NKV, head_dim=D,
//                   max_position_embeddings=2048, rope_theta=1000000.0, rms_norm_eps=1e-6,
//                   tie_word_embeddings=False, attention_bias=False, hidden_act="silu",
//                   torch_dtype="float32")
// cfg._attn_implementation = "eager"
// model = Qwen3ForCausalLM(cfg).float().eval()
// sd = {}
// sd["model.embed_tokens.weight"] = values((V, H), 1, -1.0, 1.0)
// for l in range(L):
//     b = 100 * (l + 1)
//     p = f"model.layers.{l}."
//     sd[p + "input_layernorm.weight"] = values((H,), b + 0, 0.8, 1.2)
//     sd[p + "self_attn.q_proj.weight"] = linear(NQ * D, H, b + 1)
//     sd[p + "self_attn.k_proj.weight"] = linear(NKV * D, H, b + 2)
//     sd[p + "self_attn.v_proj.weight"] = linear(NKV * D, H, b + 3)
//     sd[p + "self_attn.q_norm.weight"] = values((D,), b + 4, 0.8, 1.2)
//     sd[p + "self_attn.k_norm.weight"] = values((D,), b + 5, 0.8, 1.2)
//     sd[p + "self_attn.o_proj.weight"] = linear(H, NQ * D, b + 6)
//     sd[p + "post_attention_layernorm.weight"] = values((H,), b + 7, 0.8, 1.2)
//     sd[p + "mlp.gate_proj.weight"] = linear(I, H, b + 8)
//     sd[p + "mlp.up_proj.weight"] = linear(I, H, b + 9)
//     sd[p + "mlp.down_proj.weight"] = linear(H, I, b + 10)
// sd["model.norm.weight"] = values((H,), 2, 0.8, 1.2)
// sd["lm_head.weight"] = linear(V, H, 3)
// missing, unexpected = model.load_state_dict({k: torch.from_numpy(v) for k, v in sd.items()},
// strict=False) print("missing", missing, "unexpected", unexpected, file=sys.stderr) assert not [m
// for m in missing if "rotary" not in m] and not unexpected
//
// T = 1100
// tokens = (hash_u32(np.arange(T, dtype=np.uint64), 77) % np.uint64(V)).astype(np.int64)
// with torch.no_grad():
//     logits = model(torch.from_numpy(tokens)[None]).logits[0].double().numpy()
// positions = [0, 1, 37, 600, 1099]
// lines = ["// positions {" + ", ".join(map(str, positions)) + "}, each row all %d logits" % V]
// for p in positions:
//     lines.append("{" + ", ".join("%.8ef" % x for x in logits[p]) + "},")
// out = os.environ.get("OUT", ".")
// open(os.path.join(out, "golden.inc"), "w").write("\n".join(lines) + "\n")
// print("first tokens", tokens[:8].tolist(), "logit[0][:4]", logits[0][:4], file=sys.stderr)
#include <gtest/gtest.h>

#include <cmath>

#include "model/decoder/decoder_model.h"
#include "qwen3_model_test_util.h"

namespace nanovllm {
namespace {

// The script's hash_u32: index + seed * golden ratio, then a 32-bit integer mix.
uint32_t hash_u32(uint32_t index, uint32_t seed) {
  uint32_t x = index + seed * 0x9E3779B9u;
  x ^= x >> 16;
  x *= 0x7FEB352Du;
  x ^= x >> 15;
  x *= 0x846CA68Bu;
  x ^= x >> 16;
  return x;
}

// The script's values(): lo + (hi - lo) * hash / 2^32 in double, rounded to float32.
Tensor hashed(DecoderWeights& w, std::initializer_list<int64_t> shape, uint32_t seed, double lo,
              double hi) {
  OwnedTensor owned(DType::kF32, shape);
  float* data = owned.tensor.data_as<float>();
  for (int64_t i = 0; i < owned.tensor.numel(); ++i) {
    data[i] = static_cast<float>(
        lo + (hi - lo) * (hash_u32(static_cast<uint32_t>(i), seed) / 4294967296.0));
  }
  w.storage.push_back(std::move(owned.buffer));
  return owned.tensor;
}

Tensor hashed_linear(DecoderWeights& w, int64_t out, int64_t in, uint32_t seed) {
  const double a = 1.5 / std::sqrt(static_cast<double>(in));
  return hashed(w, {out, in}, seed, -a, a);
}

// Stacks [rows_i, cols] tensors into one, as the loader packs q|k|v and gate|up.
Tensor stack_rows(DecoderWeights& w, std::initializer_list<Tensor> parts) {
  int64_t rows = 0;
  const int64_t cols = parts.begin()->size(1);
  for (const Tensor& part : parts) rows += part.size(0);
  OwnedTensor owned(DType::kF32, {rows, cols});
  float* out = owned.tensor.data_as<float>();
  for (const Tensor& part : parts) out = std::copy_n(part.data_as<float>(), part.numel(), out);
  w.storage.push_back(std::move(owned.buffer));
  return owned.tensor;
}

ModelConfig golden_config() {
  ModelConfig c = test::tiny_config();  // V 101, H 64, I 80, 3 layers, 4/2 heads, head_dim 128
  c.max_position_embeddings = 2048;
  c.rope_theta = 1000000.0;
  return c;
}

DecoderWeights golden_weights(const ModelConfig& c) {
  const int64_t H = c.hidden_size, I = c.intermediate_size, D = c.head_dim;
  const int64_t nq = c.num_attention_heads, nkv = c.num_key_value_heads;
  DecoderWeights w;
  w.embed_tokens = hashed(w, {c.vocab_size, H}, 1, -1.0, 1.0);
  for (uint32_t l = 0; l < static_cast<uint32_t>(c.num_hidden_layers); ++l) {
    const uint32_t b = 100 * (l + 1);
    DecoderLayerWeights layer;
    layer.input_layernorm = hashed(w, {H}, b + 0, 0.8, 1.2);
    layer.qkv_proj =
        stack_rows(w, {hashed_linear(w, nq * D, H, b + 1), hashed_linear(w, nkv * D, H, b + 2),
                       hashed_linear(w, nkv * D, H, b + 3)});
    layer.q_norm = hashed(w, {D}, b + 4, 0.8, 1.2);
    layer.k_norm = hashed(w, {D}, b + 5, 0.8, 1.2);
    layer.o_proj = hashed_linear(w, H, nq * D, b + 6);
    layer.post_attention_layernorm = hashed(w, {H}, b + 7, 0.8, 1.2);
    layer.gate_up_proj =
        stack_rows(w, {hashed_linear(w, I, H, b + 8), hashed_linear(w, I, H, b + 9)});
    layer.down_proj = hashed_linear(w, H, I, b + 10);
    w.layers.push_back(layer);
  }
  w.norm = hashed(w, {H}, 2, 0.8, 1.2);
  w.lm_head = hashed_linear(w, c.vocab_size, H, 3);
  return w;
}

constexpr int kTokens = 1100;
constexpr int32_t kPositions[] = {0, 1, 37, 600, 1099};
constexpr float kHfLogits[][101] = {
    {-2.41970634e+00f, -7.20439315e-01f, -9.87677097e-01f, -1.98905754e+00f, -1.25449622e+00f,
     -2.06362113e-01f, 3.35783571e-01f,  3.49540651e-01f,  1.46387780e+00f,  5.96057892e-01f,
     -7.85994232e-01f, 6.72834273e-03f,  5.07024884e-01f,  7.24544466e-01f,  1.55699953e-01f,
     6.23320997e-01f,  -6.01613879e-01f, -5.24585664e-01f, -4.70843345e-01f, -1.83163404e-01f,
     -4.08334583e-01f, 8.18389535e-01f,  -7.25270391e-01f, 4.42659676e-01f,  -3.44588786e-01f,
     3.79192114e-01f,  -2.28407240e+00f, -1.57293093e+00f, -3.07288885e+00f, 6.83488309e-01f,
     8.42394412e-01f,  8.53657126e-02f,  1.06476974e+00f,  1.10389781e+00f,  1.92652896e-01f,
     1.39242733e+00f,  8.80490124e-01f,  -3.57814580e-01f, -4.80751008e-01f, -1.30483997e+00f,
     4.94899973e-02f,  1.56778246e-01f,  3.89253676e-01f,  -2.59495288e-01f, 3.76983911e-01f,
     -1.73153830e+00f, -1.38072610e+00f, -7.36382186e-01f, -4.31807637e-01f, 7.23425150e-02f,
     -1.85238981e+00f, -2.03201950e-01f, 6.01811528e-01f,  -6.98071718e-01f, 3.13352570e-02f,
     9.61213768e-01f,  -1.72087207e-01f, -5.40761113e-01f, 5.88818729e-01f,  5.99110015e-02f,
     1.60800308e-01f,  9.07952070e-01f,  -5.38770258e-01f, 1.61599398e+00f,  -5.52385688e-01f,
     -7.22772852e-02f, -7.23448932e-01f, 1.76134944e+00f,  4.72903043e-01f,  -7.97336459e-01f,
     9.09574509e-01f,  1.62589478e+00f,  -9.26584601e-01f, -2.61545420e-01f, -8.93371701e-02f,
     -1.56991947e+00f, 7.52426982e-01f,  -1.19890559e+00f, -1.67534783e-01f, -1.23378515e+00f,
     7.78961778e-01f,  -1.15853441e+00f, -7.62239039e-01f, -1.21011846e-01f, 5.66876195e-02f,
     4.34888691e-01f,  8.10006559e-02f,  4.00083482e-01f,  4.30609435e-01f,  -2.12700181e-02f,
     1.98312461e-01f,  -9.47769582e-01f, -9.52165782e-01f, 7.16147065e-01f,  6.69404507e-01f,
     -1.33993983e+00f, -2.45177761e-01f, 5.51383376e-01f,  2.49622703e-01f,  2.90646791e-01f,
     -4.92017806e-01f},
    {-1.77976179e+00f, 1.61731482e+00f,  -7.53756285e-01f, -1.31480801e+00f, -1.56327581e+00f,
     -2.60723177e-02f, -1.86869010e-01f, 9.12014544e-01f,  5.18225312e-01f,  4.76677477e-01f,
     -2.63717562e-01f, -3.57629955e-01f, 1.15984082e+00f,  -5.72767593e-02f, 8.49461108e-02f,
     -5.32679260e-01f, -1.93851460e-02f, 1.65747046e+00f,  -1.04930067e+00f, -9.02511537e-01f,
     1.86396778e-01f,  1.59165874e-01f,  -1.82526886e-01f, 6.24246061e-01f,  -1.65956354e+00f,
     -1.15853226e+00f, 2.97347844e-01f,  -8.39294374e-01f, -1.56473398e+00f, 8.10846150e-01f,
     7.69033670e-01f,  3.43211770e-01f,  2.27624685e-01f,  1.27381480e+00f,  1.32789528e-02f,
     -6.24687612e-01f, 8.37327063e-01f,  -1.41901648e+00f, 6.89084530e-01f,  -9.03481424e-01f,
     8.71503592e-01f,  -2.31218591e-01f, -9.24764037e-01f, 1.21711993e+00f,  -6.26778007e-01f,
     7.06138670e-01f,  1.05393350e+00f,  4.85280752e-01f,  -6.02679670e-01f, 2.87703216e-01f,
     -7.41033673e-01f, -5.42262793e-01f, 9.50409770e-01f,  -6.35323882e-01f, 6.14541173e-01f,
     -1.18315828e+00f, -2.01631457e-01f, 3.61387998e-01f,  -5.78073084e-01f, -2.80300766e-01f,
     -6.03554845e-01f, 1.23532462e+00f,  -4.66868490e-01f, -3.73389959e-01f, -4.89265501e-01f,
     -4.86862332e-01f, 1.49612471e-01f,  7.03850295e-03f,  3.92127603e-01f,  -2.60827065e-01f,
     -1.20845926e+00f, 4.89062130e-01f,  6.14841819e-01f,  -4.70212966e-01f, -9.25522029e-01f,
     -4.63053733e-01f, -1.73644125e-01f, -5.18202782e-01f, 5.54385185e-01f,  1.34634972e-01f,
     -2.94790119e-02f, -2.81377792e-01f, -9.24494982e-01f, 3.81326646e-01f,  1.33199596e+00f,
     -7.06730068e-01f, -1.92652360e-01f, 9.43668932e-02f,  6.15723848e-01f,  -4.48628590e-02f,
     -9.74296927e-01f, -3.24249119e-01f, -6.70016766e-01f, 5.63562572e-01f,  -4.80852602e-03f,
     -3.06577027e-01f, -5.53706110e-01f, -6.83997631e-01f, -1.27485678e-01f, 5.07938087e-01f,
     1.44975531e+00f},
    {-2.45422404e-02f, 1.15296870e-01f,  2.62931108e-01f,  -1.32256174e+00f, -1.55758396e-01f,
     1.14165986e+00f,  1.86748996e-01f,  1.06744587e-01f,  7.57958591e-01f,  -4.73426491e-01f,
     1.82980344e-01f,  6.09576404e-01f,  2.15041861e-01f,  -1.03619421e+00f, -1.97463596e+00f,
     7.49594569e-02f,  3.71306241e-01f,  4.94681627e-01f,  -3.27507645e-01f, -7.60383964e-01f,
     -9.16485190e-01f, 6.25661790e-01f,  -1.00871074e+00f, 4.00860846e-01f,  -1.82178140e+00f,
     2.85918772e-01f,  5.28089523e-01f,  2.04674557e-01f,  -1.22896902e-01f, 4.87719178e-02f,
     5.84142566e-01f,  -8.42775628e-02f, -2.19611451e-01f, -3.26225385e-02f, 3.83946806e-01f,
     7.24809542e-02f,  -4.05962169e-01f, -9.73148495e-02f, 1.78087687e+00f,  -5.49779773e-01f,
     -1.76739231e-01f, -2.31584534e-01f, 3.20607454e-01f,  6.78727031e-01f,  9.57078397e-01f,
     -3.10716648e-02f, -2.64280766e-01f, 9.29809868e-01f,  1.41579485e+00f,  8.66292059e-01f,
     7.69345582e-01f,  -7.37337589e-01f, 1.74774397e-02f,  -4.15024757e-01f, 3.97814035e-01f,
     2.72582829e-01f,  -5.61345756e-01f, 1.19200468e+00f,  -1.52053571e+00f, 2.49940068e-01f,
     2.31861815e-01f,  -2.75571883e-01f, 1.30929321e-01f,  1.01178133e+00f,  -8.51135552e-01f,
     -3.44527036e-01f, -8.40156615e-01f, 4.35741931e-01f,  2.04249382e-01f,  1.40016019e+00f,
     -1.32400978e+00f, 2.61274930e-02f,  9.80692506e-01f,  -3.79461378e-01f, -2.81835347e-01f,
     6.49931729e-02f,  1.44862723e+00f,  5.21597266e-01f,  4.13161963e-01f,  -8.40943635e-01f,
     5.15696667e-02f,  -7.58913383e-02f, 1.99253067e-01f,  6.75301254e-01f,  2.75995016e-01f,
     1.05992460e+00f,  -1.03770137e+00f, 2.92539835e-01f,  2.77711064e-01f,  -2.98041850e-01f,
     -1.09274042e+00f, 1.09655499e+00f,  1.56166386e-02f,  -8.55359659e-02f, 4.99378473e-01f,
     -9.34965968e-01f, -3.71980995e-01f, -2.68248737e-01f, -1.39861655e+00f, 5.59629083e-01f,
     -4.30882037e-01f},
    {1.49422300e+00f,  -4.68997717e-01f, 7.25603282e-01f,  -5.56194961e-01f, 2.44652197e-01f,
     8.12379897e-01f,  1.49746108e+00f,  1.22878224e-01f,  1.21368921e+00f,  -4.25059795e-01f,
     2.67510146e-01f,  -1.22238910e+00f, -3.32372695e-01f, 3.20815802e-01f,  -6.09714210e-01f,
     -7.26600289e-01f, 4.41873670e-01f,  -1.13645959e+00f, 1.80042720e+00f,  4.10350531e-01f,
     -2.98467636e-01f, -9.34522450e-01f, -1.12058353e+00f, -8.46136868e-01f, 6.79993093e-01f,
     2.08119321e+00f,  7.37295926e-01f,  -1.29232407e+00f, 3.96666408e-01f,  -8.66604149e-01f,
     -1.72988486e+00f, -5.42542219e-01f, -1.59680259e+00f, 1.35548151e+00f,  1.60827637e+00f,
     6.28334284e-01f,  -1.20303504e-01f, -3.73470247e-01f, 7.98831999e-01f,  -4.53837097e-01f,
     -5.80567360e-01f, 1.02035987e+00f,  2.74742544e-01f,  7.15006530e-01f,  9.28100586e-01f,
     1.53017223e+00f,  -1.74826354e-01f, -2.69104868e-01f, -2.93039829e-01f, 2.13839620e-01f,
     2.97299355e-01f,  -6.87312603e-01f, 6.65578365e-01f,  -1.54876161e+00f, -3.16029698e-01f,
     -1.59284711e-01f, -1.90440804e-01f, 1.42828810e+00f,  1.68008387e-01f,  -1.21768618e+00f,
     -1.31909400e-01f, -1.43181467e+00f, -3.55479382e-02f, -5.19639671e-01f, 4.01733965e-01f,
     1.31421089e-01f,  -1.61955464e+00f, 9.92757082e-01f,  -7.74674237e-01f, -2.22605482e-01f,
     1.02510706e-01f,  -3.96095872e-01f, -7.59803236e-01f, -8.37399289e-02f, -8.65952313e-01f,
     1.12204134e+00f,  9.91236493e-02f,  -1.00820422e+00f, 2.60444492e-01f,  7.72789061e-01f,
     9.91479993e-01f,  5.25252163e-01f,  2.26978168e-01f,  -4.88424718e-01f, -2.58491725e-01f,
     3.15598510e-02f,  -1.88054216e+00f, 2.70681828e-01f,  -3.71655732e-01f, -1.29616022e+00f,
     3.92395645e-01f,  -5.08699238e-01f, -6.33250535e-01f, -3.13815892e-01f, 1.21795094e+00f,
     4.50318068e-01f,  -1.74271882e-01f, -3.38229477e-01f, 6.27513379e-02f,  -1.32083833e+00f,
     -8.79285216e-01f},
    {6.30213380e-01f,  7.02908635e-02f,  -1.30718970e+00f, 1.29071653e+00f,  1.53479314e+00f,
     1.09117150e+00f,  -7.49584362e-02f, -1.79029346e+00f, 4.65901718e-02f,  2.15688258e-01f,
     3.13583374e-01f,  -3.35803747e-01f, 4.30798739e-01f,  9.97978970e-02f,  -1.02593064e+00f,
     -4.54975843e-01f, -6.38805330e-01f, -1.01471722e+00f, 1.91912711e+00f,  -1.28789306e+00f,
     1.17260113e-01f,  -1.50307131e+00f, -9.35361743e-01f, 3.50433402e-02f,  -5.53158700e-01f,
     1.01912248e+00f,  3.59979808e-01f,  8.96595597e-01f,  1.53724039e+00f,  6.90919220e-01f,
     -1.41215134e+00f, -1.49828875e+00f, -5.07009514e-02f, 7.96190560e-01f,  1.32417500e-01f,
     -5.64285219e-01f, -3.05813074e-01f, 9.12823856e-01f,  2.99426049e-01f,  -5.59536636e-01f,
     -8.66460323e-01f, 3.40578288e-01f,  -7.27101624e-01f, -3.88469547e-01f, 7.75757968e-01f,
     3.64803165e-01f,  2.19127864e-01f,  -5.22958994e-01f, -4.58260357e-01f, 7.35894144e-01f,
     -5.66695690e-01f, -1.33329880e+00f, 1.69632748e-01f,  -3.24383676e-01f, -6.13726079e-02f,
     1.31903362e+00f,  1.50379822e-01f,  -7.40414917e-01f, 7.50120640e-01f,  5.97807348e-01f,
     8.23923573e-02f,  -9.26009715e-02f, 7.62486637e-01f,  -5.00602484e-01f, 1.10177982e+00f,
     1.06254792e+00f,  -4.64844227e-01f, -7.06304908e-02f, 1.19238934e-02f,  3.69094104e-01f,
     4.91137713e-01f,  -1.51279464e-01f, 1.17831147e+00f,  6.11654103e-01f,  -4.36410099e-01f,
     -1.70646477e-02f, -9.21583235e-01f, 1.72687042e+00f,  1.04658258e+00f,  -1.88747823e-01f,
     3.28123689e-01f,  8.85151386e-01f,  3.28697503e-01f,  1.74892083e-01f,  -3.18465203e-01f,
     -7.86388755e-01f, -7.01750457e-01f, -6.98798001e-01f, -7.05323935e-01f, -1.65387583e+00f,
     6.12730742e-01f,  -7.28841841e-01f, -6.27739370e-01f, -3.43217313e-01f, -5.48591971e-01f,
     7.03144148e-02f,  5.12683690e-01f,  -1.16248906e-01f, -7.32672453e-01f, -7.69898474e-01f,
     5.15139341e-01f},
};

TEST(DecoderModelVsHuggingFace, LogitsOfA1100TokenPrefillMatch) {
  const ModelConfig config = golden_config();
  auto backend = make_cpu_backend(0);
  DecoderModel model(config, golden_weights(config), *backend);

  std::vector<int32_t> tokens(kTokens);
  for (int t = 0; t < kTokens; ++t) tokens[t] = static_cast<int32_t>(hash_u32(t, 77) % 101);
  ASSERT_EQ(tokens[0], 20);  // the script's first tokens: [20, 17, 60, 81, ...]
  ASSERT_EQ(tokens[3], 81);

  test::PagedKvCache cache(config, kTokens / 16 + 2, 16);
  test::TestSequence seq(tokens);
  test::BuiltBatch built = test::build_batch({test::Step{&seq, kTokens}}, cache);
  // Logits only for the golden positions: exercises gather_rows with scattered rows.
  built.last_rows = test::ints(std::vector<int32_t>(std::begin(kPositions), std::end(kPositions)),
                               {std::size(kPositions)});
  built.batch.last_token_indices = built.last_rows.tensor;
  const Tensor logits = model.forward(built.batch, cache.layers());
  ASSERT_EQ(logits.size(0), static_cast<int64_t>(std::size(kPositions)));

  for (size_t r = 0; r < std::size(kPositions); ++r) {
    float scale = 0.0f;
    for (float v : kHfLogits[r]) scale = std::max(scale, std::abs(v));
    for (int v = 0; v < 101; ++v) {
      const float got = logits.data_as<float>()[r * 101 + v];
      // fp32 against fp32 summed in other orders: within 2e-5 of the row's largest logit
      // (the observed differences are about 1e-6).
      ASSERT_NEAR(got, kHfLogits[r][v], 2e-5f * scale)
          << "position " << kPositions[r] << " logit " << v;
    }
  }
}

}  // namespace
}  // namespace nanovllm
