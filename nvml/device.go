package nvml

import (
	"errors"
	"fmt"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Library is the part of NVML the collector uses. go-nvml's nvml.Interface
// satisfies it (real GPUs) and so does its mock.Interface (--fake-gpus),
// so that everything after enumeration runs the same code either way.
type Library interface {
	Init() gonvml.Return
	Shutdown() gonvml.Return
	DeviceGetCount() (int, gonvml.Return)
	DeviceGetHandleByIndex(int) (gonvml.Device, gonvml.Return)
}

// Device is the part of an NVML device handle the collector uses.
type Device interface {
	GetUUID() (string, gonvml.Return)
	GetName() (string, gonvml.Return)
	GetMemoryInfo() (gonvml.Memory, gonvml.Return)
	GetUtilizationRates() (gonvml.Utilization, gonvml.Return)
	GetComputeRunningProcesses() ([]gonvml.ProcessInfo, gonvml.Return)
}

// NewNVML returns the node's NVML. go-nvml opens libnvidia-ml.so.1 with
// dlopen only when Init is called, so building this on a host without
// the NVIDIA driver is harmless: Init then fails with
// ERROR_LIBRARY_NOT_FOUND, which Open turns into ErrNoDriver.
func NewNVML() Library { return gonvml.New() }

// ErrNoDriver means NVML could not be loaded: no NVIDIA driver on the node.
var ErrNoDriver = errors.New("NVML (libnvidia-ml.so.1) not found: is the NVIDIA driver installed on this node? (--fake-gpus runs without one)")

// initLibrary starts NVML and explains the usual failures.
func initLibrary(lib Library) error {
	ret := lib.Init()
	switch ret {
	case gonvml.SUCCESS:
		return nil
	case gonvml.ERROR_LIBRARY_NOT_FOUND:
		return ErrNoDriver
	case gonvml.ERROR_DRIVER_NOT_LOADED:
		return fmt.Errorf("NVML init: the NVIDIA kernel driver is not loaded (%s)", ret.Error())
	case gonvml.ERROR_NO_PERMISSION:
		return fmt.Errorf("NVML init: no permission to open the GPU devices (%s)", ret.Error())
	default:
		return fmt.Errorf("NVML init: %s", ret.Error())
	}
}

// GPU is one device as seen in one interval.
type GPU struct {
	// Index is NVML's index, the number Slurm's gres.conf and
	// SLURM_JOB_GPUS use for the device.
	Index int
	UUID  string
	// Name is NVML's product name ("Tesla V100-SXM2-16GB"); Type is the
	// Slurm GRES type it maps to ("v100").
	Name string
	Type string
	// MemUsed and MemTotal are in bytes.
	MemUsed, MemTotal uint64
	// Util is the fraction of the last sample period during which a
	// kernel ran (NVML's utilization.gpu / 100).
	Util float64
	// PIDs are the compute processes on the device (host PIDs).
	PIDs []uint32
}

// Skipped is a device that could not be read this interval.
type Skipped struct {
	Index int
	Err   error
}

// Enumerate reads every device. A device that fails to answer (fallen off
// the bus, reset, in a bad state) is skipped and returned in skipped
// rather than failing the whole node: the jobs on the other GPUs still
// deserve a report.
func Enumerate(lib Library, types *TypeMap) (gpus []GPU, skipped []Skipped, err error) {
	n, ret := lib.DeviceGetCount()
	if ret != gonvml.SUCCESS {
		return nil, nil, fmt.Errorf("count the GPUs: %s", ret.Error())
	}
	for i := 0; i < n; i++ {
		g, err := readDevice(lib, i, types)
		if err != nil {
			skipped = append(skipped, Skipped{Index: i, Err: err})
			continue
		}
		gpus = append(gpus, g)
	}
	return gpus, skipped, nil
}

func readDevice(lib Library, i int, types *TypeMap) (GPU, error) {
	h, ret := lib.DeviceGetHandleByIndex(i)
	if ret != gonvml.SUCCESS {
		return GPU{}, fmt.Errorf("GPU %d: get its handle: %s", i, ret.Error())
	}
	var d Device = h
	g := GPU{Index: i}
	if g.UUID, ret = d.GetUUID(); ret != gonvml.SUCCESS {
		return GPU{}, fmt.Errorf("GPU %d: read its UUID: %s", i, ret.Error())
	}
	if g.Name, ret = d.GetName(); ret != gonvml.SUCCESS {
		return GPU{}, fmt.Errorf("GPU %d: read its name: %s", i, ret.Error())
	}
	g.Type = types.Type(g.Name)
	// Some boards (and MIG-enabled ones) do not support every query; a
	// missing figure reads as zero, but a device that stopped answering
	// is skipped.
	mem, ret := d.GetMemoryInfo()
	switch ret {
	case gonvml.SUCCESS:
		g.MemUsed, g.MemTotal = mem.Used, mem.Total
	case gonvml.ERROR_NOT_SUPPORTED:
	default:
		return GPU{}, fmt.Errorf("GPU %d: read its memory use: %s", i, ret.Error())
	}
	util, ret := d.GetUtilizationRates()
	switch ret {
	case gonvml.SUCCESS:
		g.Util = min(float64(util.Gpu)/100, 1)
	case gonvml.ERROR_NOT_SUPPORTED:
	default:
		return GPU{}, fmt.Errorf("GPU %d: read its utilization: %s", i, ret.Error())
	}
	// The process list only serves the fallback mapping; without it the
	// device is still worth reporting.
	if procs, ret := d.GetComputeRunningProcesses(); ret == gonvml.SUCCESS {
		for _, p := range procs {
			g.PIDs = append(g.PIDs, p.Pid)
		}
	}
	return g, nil
}
