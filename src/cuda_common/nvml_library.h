// NVML (the driver's management library) opened at run time, like cuDNN (nothing links against
// it): a CUDA device's SM clock, board power and whether a power or thermal limit holds its clock
// down. What the tuner's sustained timing reads between rounds and records with a result
// (docs/design.md, "Sustained timing"). Never a failure: without libnvidia-ml (a container
// without the driver's utilities, a machine without a GPU) or for a device NVML does not know,
// a reading is all zeros.
#pragma once

#include <string>
#include <vector>

#include "tunableop/status.h"
#include "tunableop/timer.h"

namespace tunableop::cuda {

// The entry points used, bound from one opened library.
struct NvmlApi;

// Opens NVML from the first of `paths` that loads and initializes it (not cached: tests try
// paths that must fail); unsupported, naming every path tried and why, when none does.
StatusOr<const NvmlApi*> open_nvml(const std::vector<std::string>& paths);

// The process's NVML, opened once: $TUNABLEOP_NVML_LIBRARY first, then libnvidia-ml.so.1.
StatusOr<const NvmlApi*> nvml_api();

// What NVML says of `api`'s device with this PCI bus id ("0000:19:00.0"); zeros when unknown.
DeviceClock read_clock(const NvmlApi& api, const std::string& pci_bus_id);

// The clock of CUDA device `ordinal` now (found by its PCI bus id, so CUDA_VISIBLE_DEVICES
// cannot confuse the two numberings); zeros when NVML or the device is not available.
DeviceClock read_device_clock(int ordinal);

}  // namespace tunableop::cuda
