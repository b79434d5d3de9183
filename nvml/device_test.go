package nvml

import (
	"errors"
	"strings"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
)

func TestParseFakeGPUs(t *testing.T) {
	gpus, err := ParseFakeGPUs("v100:2, k80:1,NVIDIA B200:1")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range gpus {
		names = append(names, g.Name)
	}
	want := "Tesla V100-SXM2-16GB,Tesla V100-SXM2-16GB,Tesla K80,NVIDIA B200"
	if got := strings.Join(names, ","); got != want {
		t.Errorf("names %s, want %s", got, want)
	}
	for _, bad := range []string{"", "v100", "v100:0", "v100:x", ":4", "v100:4,", "v100:300"} {
		if _, err := ParseFakeGPUs(bad); err == nil {
			t.Errorf("ParseFakeGPUs(%q) accepted", bad)
		}
	}
}

func TestEnumerateFake(t *testing.T) {
	specs, err := ParseFakeGPUs("v100:4,k80:4")
	if err != nil {
		t.Fatal(err)
	}
	specs[1].Util, specs[1].MemUsed, specs[1].PIDs = 75, 3*gib, []uint32{42, 43}
	lib := NewFake(specs)
	if err := initLibrary(lib); err != nil {
		t.Fatal(err)
	}
	gpus, skipped, err := Enumerate(lib, DefaultTypeMap())
	if err != nil || len(skipped) != 0 {
		t.Fatalf("err %v, skipped %v", err, skipped)
	}
	if len(gpus) != 8 {
		t.Fatalf("%d GPUs, want 8", len(gpus))
	}
	for i, g := range gpus {
		want := "v100"
		if i >= 4 {
			want = "k80"
		}
		if g.Index != i || g.Type != want || g.UUID == "" {
			t.Errorf("GPU %d: %+v, want index %d type %s", i, g, i, want)
		}
	}
	g := gpus[1]
	if g.Util != 0.75 || g.MemUsed != 3*gib || g.MemTotal != 16*gib || len(g.PIDs) != 2 || g.PIDs[1] != 43 {
		t.Errorf("GPU 1 = %+v", g)
	}
	if gpus[0].UUID == gpus[1].UUID {
		t.Error("fake GPUs share a UUID")
	}
}

// TestEnumerateDGXA100 runs on go-nvml's own DGX A100 mock, which lacks
// utilization and processes: they are filled in as a real driver would.
func TestEnumerateDGXA100(t *testing.T) {
	server := dgxa100.New()
	for _, d := range server.Devices {
		dev := d.(*dgxa100.Device)
		dev.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
			return gonvml.Utilization{Gpu: 50}, gonvml.SUCCESS
		}
		dev.GetComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) {
			return nil, gonvml.ERROR_NOT_SUPPORTED
		}
	}
	gpus, skipped, err := Enumerate(server, DefaultTypeMap())
	if err != nil || len(skipped) != 0 || len(gpus) != 8 {
		t.Fatalf("%d GPUs, skipped %v, err %v", len(gpus), skipped, err)
	}
	for _, g := range gpus {
		if g.Type != "a100" || g.Util != 0.5 || g.MemTotal == 0 || !strings.HasPrefix(g.UUID, "GPU-") {
			t.Errorf("GPU %+v", g)
		}
	}
}

// lostDevice answers like a GPU that fell off the bus.
func lostDevice() *mock.Device {
	lost := func() (string, gonvml.Return) { return "", gonvml.ERROR_GPU_IS_LOST }
	return &mock.Device{GetUUIDFunc: lost, GetNameFunc: lost}
}

func TestEnumerateSkips(t *testing.T) {
	specs, _ := ParseFakeGPUs("a100:3")
	fake := NewFake(specs).(*mock.Interface)
	good := fake.DeviceGetHandleByIndexFunc
	cases := []struct {
		name   string
		device func(i int) (gonvml.Device, gonvml.Return)
		left   []int
	}{
		{"lost GPU", func(i int) (gonvml.Device, gonvml.Return) {
			if i == 1 {
				return lostDevice(), gonvml.SUCCESS
			}
			return good(i)
		}, []int{0, 2}},
		{"no handle", func(i int) (gonvml.Device, gonvml.Return) {
			if i == 0 {
				return nil, gonvml.ERROR_UNKNOWN
			}
			return good(i)
		}, []int{1, 2}},
		{"memory query fails", func(i int) (gonvml.Device, gonvml.Return) {
			d, r := good(i)
			if i == 2 {
				d.(*mock.Device).GetMemoryInfoFunc = func() (gonvml.Memory, gonvml.Return) { return gonvml.Memory{}, gonvml.ERROR_GPU_IS_LOST }
			}
			return d, r
		}, []int{0, 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lib := &mock.Interface{DeviceGetCountFunc: fake.DeviceGetCountFunc, DeviceGetHandleByIndexFunc: c.device}
			gpus, skipped, err := Enumerate(lib, DefaultTypeMap())
			if err != nil {
				t.Fatal(err)
			}
			var left []int
			for _, g := range gpus {
				left = append(left, g.Index)
			}
			if len(left) != len(c.left) || left[0] != c.left[0] || left[1] != c.left[1] {
				t.Errorf("GPUs left %v, want %v", left, c.left)
			}
			if len(skipped) != 1 || skipped[0].Err == nil {
				t.Errorf("skipped %v, want one with its error", skipped)
			}
		})
	}
}

// TestEnumerateUnsupported: boards that do not support a query are still
// reported, with the figure at zero.
func TestEnumerateUnsupported(t *testing.T) {
	specs, _ := ParseFakeGPUs("t4:1")
	fake := NewFake(specs).(*mock.Interface)
	d, _ := fake.DeviceGetHandleByIndexFunc(0)
	d.(*mock.Device).GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
		return gonvml.Utilization{}, gonvml.ERROR_NOT_SUPPORTED
	}
	gpus, skipped, err := Enumerate(fake, DefaultTypeMap())
	if err != nil || len(skipped) != 0 || len(gpus) != 1 || gpus[0].Util != 0 {
		t.Errorf("gpus %+v skipped %v err %v", gpus, skipped, err)
	}
}

func TestInitErrors(t *testing.T) {
	cases := []struct {
		ret  gonvml.Return
		want string
	}{
		{gonvml.ERROR_LIBRARY_NOT_FOUND, "is the NVIDIA driver installed"},
		{gonvml.ERROR_DRIVER_NOT_LOADED, "kernel driver is not loaded"},
		{gonvml.ERROR_NO_PERMISSION, "no permission"},
		{gonvml.ERROR_UNKNOWN, "NVML init"},
	}
	for _, c := range cases {
		lib := &mock.Interface{InitFunc: func() gonvml.Return { return c.ret }}
		_, err := Open(lib, Config{Node: "n"})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Init %v: error %v, want one mentioning %q", c.ret, err, c.want)
		}
		if len(lib.ShutdownCalls()) != 0 {
			t.Errorf("Init %v: Shutdown called after a failed Init", c.ret)
		}
	}
}

// TestRealNVMLWithoutDriver runs go-nvml's real loader. On a host without
// the NVIDIA driver (CI) Open must fail with ErrNoDriver, not crash; on a
// GPU node it must enumerate.
func TestRealNVMLWithoutDriver(t *testing.T) {
	c, err := Open(NewNVML(), Config{Node: "n"})
	if errors.Is(err, ErrNoDriver) {
		return
	}
	if err != nil {
		t.Fatalf("NVML: %v", err)
	}
	defer c.Close()
	gpus, skipped, err := Enumerate(c.lib, DefaultTypeMap())
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gpus {
		t.Logf("GPU %d %s %q -> %s, %d/%d bytes, util %.2f, %d processes", g.Index, g.UUID, g.Name, g.Type, g.MemUsed, g.MemTotal, g.Util, len(g.PIDs))
	}
	for _, s := range skipped {
		t.Logf("skipped GPU %d: %v", s.Index, s.Err)
	}
}
