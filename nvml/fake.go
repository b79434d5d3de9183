package nvml

import (
	"fmt"
	"strconv"
	"strings"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// FakeGPU describes one device of a fake node.
type FakeGPU struct {
	// Name is the NVML product name the device reports.
	Name     string
	MemTotal uint64
	MemUsed  uint64
	// Util is NVML's utilization.gpu, in percent.
	Util uint32
	PIDs []uint32
}

const gib = 1 << 30

// fakeProducts gives each common type a real board's product name and
// memory, so that a fake node goes through the same type map as a real one.
var fakeProducts = map[string]FakeGPU{
	"k80":  {Name: "Tesla K80", MemTotal: 12 * gib},
	"p100": {Name: "Tesla P100-PCIE-16GB", MemTotal: 16 * gib},
	"v100": {Name: "Tesla V100-SXM2-16GB", MemTotal: 16 * gib},
	"t4":   {Name: "Tesla T4", MemTotal: 16 * gib},
	"a100": {Name: "NVIDIA A100-SXM4-40GB", MemTotal: 40 * gib},
	"l40s": {Name: "NVIDIA L40S", MemTotal: 48 * gib},
	"h100": {Name: "NVIDIA H100 80GB HBM3", MemTotal: 80 * gib},
	"h200": {Name: "NVIDIA H200", MemTotal: 141 * gib},
}

// maxFakeGPUs bounds a fake node; real ones hold 8 or 16.
const maxFakeGPUs = 256

// ParseFakeGPUs reads --fake-gpus: NAME:COUNT pairs separated by commas,
// in device order. NAME is a type from the built-in list (k80, p100,
// v100, t4, a100, l40s, h100, h200), which gets that board's product
// name, or else a product name used as it is ("NVIDIA B200:8").
func ParseFakeGPUs(spec string) ([]FakeGPU, error) {
	var gpus []FakeGPU
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		i := strings.LastIndexByte(item, ':')
		if i <= 0 {
			return nil, fmt.Errorf("fake GPUs %q: want NAME:COUNT, got %q", spec, item)
		}
		name := strings.TrimSpace(item[:i])
		n, err := strconv.Atoi(item[i+1:])
		if err != nil || n < 1 {
			return nil, fmt.Errorf("fake GPUs %q: count %q is not a positive number", spec, item[i+1:])
		}
		if len(gpus)+n > maxFakeGPUs {
			return nil, fmt.Errorf("fake GPUs %q: more than %d devices", spec, maxFakeGPUs)
		}
		g, ok := fakeProducts[strings.ToLower(name)]
		if !ok {
			g = FakeGPU{Name: name, MemTotal: 16 * gib}
		}
		for range n {
			gpus = append(gpus, g)
		}
	}
	return gpus, nil
}

// NewFake returns an NVML of the given devices, built on go-nvml's mock.
// Its devices are idle unless described otherwise.
func NewFake(gpus []FakeGPU) Library {
	devices := make([]*mock.Device, len(gpus))
	for i, g := range gpus {
		uuid := fmt.Sprintf("GPU-fa4e0000-0000-0000-0000-%012d", i)
		devices[i] = &mock.Device{
			GetUUIDFunc: func() (string, gonvml.Return) { return uuid, gonvml.SUCCESS },
			GetNameFunc: func() (string, gonvml.Return) { return g.Name, gonvml.SUCCESS },
			GetMemoryInfoFunc: func() (gonvml.Memory, gonvml.Return) {
				return gonvml.Memory{Total: g.MemTotal, Used: g.MemUsed, Free: g.MemTotal - min(g.MemUsed, g.MemTotal)}, gonvml.SUCCESS
			},
			GetUtilizationRatesFunc: func() (gonvml.Utilization, gonvml.Return) {
				return gonvml.Utilization{Gpu: g.Util}, gonvml.SUCCESS
			},
			GetComputeRunningProcessesFunc: func() ([]gonvml.ProcessInfo, gonvml.Return) {
				procs := make([]gonvml.ProcessInfo, len(g.PIDs))
				for j, pid := range g.PIDs {
					procs[j] = gonvml.ProcessInfo{Pid: pid}
				}
				return procs, gonvml.SUCCESS
			},
		}
	}
	return &mock.Interface{
		InitFunc:           func() gonvml.Return { return gonvml.SUCCESS },
		ShutdownFunc:       func() gonvml.Return { return gonvml.SUCCESS },
		DeviceGetCountFunc: func() (int, gonvml.Return) { return len(devices), gonvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (gonvml.Device, gonvml.Return) {
			if i < 0 || i >= len(devices) {
				return nil, gonvml.ERROR_INVALID_ARGUMENT
			}
			return devices[i], gonvml.SUCCESS
		},
	}
}
