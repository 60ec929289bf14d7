// A tensor-parallel group of this process's GPUs (one rank a device, ordinals 0 to size - 1)
// through NCCL, whose collectives run on each rank's stream and so inside captured graphs. NCCL
// is loaded when a group is first made (dlopen of libnccl.so.2), so that a process that runs on
// one GPU needs no NCCL.
#pragma once

#include <memory>
#include <vector>

#include "dist/communicator.h"

namespace nanovllm::cuda {

// One communicator per rank, rank i at index i, on devices 0 to size - 1. Throws Error when
// NCCL cannot be loaded or the group cannot be made.
std::vector<std::shared_ptr<Communicator>> make_nccl_group(int size);

}  // namespace nanovllm::cuda
