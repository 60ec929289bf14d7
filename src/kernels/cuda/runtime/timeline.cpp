#include "kernels/cuda/runtime/timeline.h"

#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

#include "kernels/cuda/runtime/cuda_check.h"

namespace nanovllm::cuda::timeline {
namespace {

std::vector<void (*)(const Ring&)>& units() {
  static std::vector<void (*)(const Ring&)> attach_functions;
  return attach_functions;
}

Ring& ring() {
  static Ring instance;
  return instance;
}

int sm_count() {
  int device = 0;
  int sms = 0;
  NVLLM_CUDA_CHECK(cudaGetDevice(&device));
  NVLLM_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

}  // namespace

bool register_unit(void (*attach)(const Ring& ring)) {
  units().push_back(attach);
  return true;
}

void start(unsigned per_sm) {
  Ring& r = ring();
  NVLLM_CHECK_MSG(r.records == nullptr, "the timeline was already started");
  NVLLM_CHECK_GT(per_sm, 0u);
  const size_t sms = sm_count();
  NVLLM_CUDA_CHECK(cudaMalloc(&r.records, sizeof(Record) * per_sm * sms));
  NVLLM_CUDA_CHECK(cudaMemset(r.records, 0, sizeof(Record) * per_sm * sms));
  NVLLM_CUDA_CHECK(cudaMalloc(&r.next, sizeof(unsigned) * 32 * sms));
  NVLLM_CUDA_CHECK(cudaMemset(r.next, 0, sizeof(unsigned) * 32 * sms));
  r.per_sm = per_sm;
  for (auto attach : units()) attach(r);
  NVLLM_CUDA_CHECK(cudaDeviceSynchronize());
}

void dump(const std::string& path) {
  const Ring& r = ring();
  if (r.records == nullptr) return;
  NVLLM_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<Record> all(static_cast<size_t>(r.per_sm) * sm_count());
  NVLLM_CUDA_CHECK(
      cudaMemcpy(all.data(), r.records, sizeof(Record) * all.size(), cudaMemcpyDeviceToHost));
  std::vector<Record> written;
  for (const Record& record : all) {
    if (record.end_ns != 0) written.push_back(record);
  }
  std::FILE* file = std::fopen(path.c_str(), "wb");
  NVLLM_CHECK_MSG(file != nullptr, "cannot write the timeline to {}", path);
  const uint32_t header[3] = {0x4c54564eu, static_cast<uint32_t>(written.size()),  // "NVTL"
                              static_cast<uint32_t>(kMarks)};
  bool ok = std::fwrite(header, sizeof header, 1, file) == 1 &&
            std::fwrite(written.data(), sizeof(Record), written.size(), file) == written.size();
  ok = std::fclose(file) == 0 && ok;
  NVLLM_CHECK_MSG(ok, "writing the timeline to {} failed", path);
  std::fprintf(stderr, "timeline: %zu records written to %s\n", written.size(), path.c_str());
}

}  // namespace nanovllm::cuda::timeline
