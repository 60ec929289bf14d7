// A tensor-parallel group of this process's GPUs (one rank a device, ordinals 0 to size - 1)
// through NCCL, whose collectives run on each rank's stream and so inside captured graphs; the
// small all-reduces of decode steps take the one-shot path over peer memory instead
// (peer_all_reduce.h) where the GPUs map each other's memory. NCCL is loaded when a group is
// first made (dlopen of libnccl.so.2), so that a process that runs on one GPU needs no NCCL.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "dist/communicator.h"

namespace nanovllm::cuda {

// Where the one-shot all-reduce over peer memory (peer_all_reduce.h) beats NCCL's ring:
// messages up to this many bytes, for `size` ranks (allreduce_bench measures both).
size_t default_one_shot_max_bytes(int size);

// One communicator per rank, rank i at index i, on devices 0 to size - 1. All-reduces of at
// most `one_shot_max_bytes` take the one-shot path where the GPUs map each other's memory (0:
// NCCL for all). Throws Error when NCCL cannot be loaded or the group cannot be made.
std::vector<std::shared_ptr<Communicator>> make_nccl_group(int size, size_t one_shot_max_bytes);

}  // namespace nanovllm::cuda
