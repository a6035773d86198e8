// Go side of weft's side-by-side benchmarks (tools/bench/compare). Same definitions, command line
// and RESULT lines as the C++ programs (see tools/bench/bench_util.hpp), written the way Go is
// usually written, so the comparison is against idiomatic Go:
//
//	switch   GOMAXPROCS(1), two goroutines ping-pong with runtime.Gosched(); ns per Gosched.
//	         Gosched puts the goroutine on the global run queue: that is the definition.
//	spawn    one goroutine starts N empty goroutines, a sync.WaitGroup waits; ns per spawn, peak RSS
//	skynet   the classic goroutine + unbuffered channel skynet; sum verified; ms, peak RSS
//	park_mem N goroutines each blocked on its own chan struct{}; statm RSS delta per goroutine
//	mutex    4*GOMAXPROCS goroutines increment one counter under sync.Mutex; count verified
//
// Worker count = GOMAXPROCS; --workers=0 means all CPUs (runtime.NumCPU()).
//
// Build: cd tools/bench/go && go build -o OUT .
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	switchN   = 10_000_000
	spawnN    = 1_000_000
	skynetN   = 1_000_000
	parkN     = 100_000
	mutexN    = 10_000_000
	skynetDiv = 10
)

var (
	benchFlag   = flag.String("bench", "", "switch, spawn, skynet, park_mem or mutex")
	workersFlag = flag.Int("workers", 0, "worker threads (GOMAXPROCS); 0 means all CPUs")
	nFlag       = flag.Int64("n", 0, "size override (0: the bench's default)")
)

func usageError(msg string) {
	fmt.Fprintf(os.Stderr, "%s: %s\nusage: %s --bench=NAME [--workers=N] [--n=COUNT]\n", os.Args[0], msg, os.Args[0])
	os.Exit(2)
}

func workersGiven() bool {
	given := false
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "workers" {
			given = true
		}
	})
	return given
}

func resolveWorkers() int {
	if *workersFlag == 0 {
		return runtime.NumCPU()
	}
	return *workersFlag
}

func variant() string {
	if *workersFlag == 0 {
		return "wall"
	}
	return "w" + strconv.Itoa(*workersFlag)
}

func sizeOr(def int64) int64 {
	if *nFlag != 0 {
		return *nFlag
	}
	return def
}

func result(bench, variant, metric string, value float64, unit string) {
	fmt.Printf("RESULT %s %s %s %.2f %s\n", bench, variant, metric, value, unit)
}

func peakRSSMiB() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		fmt.Fprintln(os.Stderr, "getrusage:", err)
		os.Exit(1)
	}
	return float64(ru.Maxrss) / 1024.0 // KiB on Linux
}

func currentRSSBytes() int64 {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fields := strings.Fields(string(data))
	if len(fields) < 2 {
		fmt.Fprintln(os.Stderr, "cannot parse /proc/self/statm")
		os.Exit(1)
	}
	pages, err := strconv.ParseInt(fields[1], 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cannot parse /proc/self/statm:", err)
		os.Exit(1)
	}
	return pages * int64(os.Getpagesize())
}

func verify(bench string, got, want int64) {
	if got != want {
		fmt.Fprintf(os.Stderr, "%s: WRONG RESULT: got %d, want %d\n", bench, got, want)
		os.Exit(1)
	}
}

func benchSwitch() {
	if workersGiven() && *workersFlag != 1 {
		usageError("switch runs on one worker")
	}
	runtime.GOMAXPROCS(1)
	half := sizeOr(switchN) / 2 // Gosched calls per goroutine
	var wg sync.WaitGroup
	wg.Add(2)
	body := func() {
		for i := int64(0); i < half; i++ {
			runtime.Gosched()
		}
		wg.Done()
	}
	t0 := time.Now()
	go body()
	go body()
	wg.Wait()
	ns := float64(time.Since(t0).Nanoseconds())
	result("switch", "-", "ns_per_switch", ns/float64(2*half), "ns")
}

func benchSpawn() {
	runtime.GOMAXPROCS(resolveWorkers())
	n := sizeOr(spawnN)
	var wg sync.WaitGroup
	wg.Add(int(n))
	t0 := time.Now()
	for i := int64(0); i < n; i++ {
		go func() { wg.Done() }()
	}
	wg.Wait()
	ns := float64(time.Since(t0).Nanoseconds())
	result("spawn", variant(), "ns_per_spawn", ns/float64(n), "ns")
	result("spawn", variant(), "peak_rss", peakRSSMiB(), "MiB")
}

func skynet(c chan int64, num, size, div int64) {
	if size == 1 {
		c <- num
		return
	}
	rc := make(chan int64)
	var sum int64
	for i := int64(0); i < div; i++ {
		subNum := num + i*(size/div)
		go skynet(rc, subNum, size/div, div)
	}
	for i := int64(0); i < div; i++ {
		sum += <-rc
	}
	c <- sum
}

func benchSkynet() {
	runtime.GOMAXPROCS(resolveWorkers())
	n := sizeOr(skynetN)
	for m := n; m != 1; m /= skynetDiv {
		if m%skynetDiv != 0 {
			usageError(fmt.Sprintf("skynet: --n must be a power of 10, not %d", n))
		}
	}
	t0 := time.Now()
	c := make(chan int64)
	go skynet(c, 0, n, skynetDiv)
	sum := <-c
	ns := float64(time.Since(t0).Nanoseconds())
	verify("skynet", sum, n*(n-1)/2)
	result("skynet", variant(), "time", ns/1e6, "ms")
	result("skynet", variant(), "peak_rss", peakRSSMiB(), "MiB")
}

func benchParkMem() {
	runtime.GOMAXPROCS(resolveWorkers())
	n := sizeOr(parkN)
	before := currentRSSBytes()
	chans := make([]chan struct{}, n)
	for i := range chans {
		chans[i] = make(chan struct{})
	}
	var started, finished sync.WaitGroup
	started.Add(int(n))
	finished.Add(int(n))
	for i := range chans {
		go func(ch chan struct{}) {
			started.Done()
			<-ch
			finished.Done()
		}(chans[i])
	}
	started.Wait()
	// The last goroutine to start is a few instructions from parking; give it time to get there.
	time.Sleep(20 * time.Millisecond)
	parked := currentRSSBytes()
	for _, ch := range chans {
		close(ch)
	}
	finished.Wait()
	result("park_mem", variant(), "bytes_per_fiber", float64(parked-before)/float64(n), "B")
}

func benchMutex() {
	workers := resolveWorkers()
	runtime.GOMAXPROCS(workers)
	n := sizeOr(mutexN)
	goroutines := int64(4 * workers)
	var mu sync.Mutex
	var counter int64
	var wg sync.WaitGroup
	wg.Add(int(goroutines))
	t0 := time.Now()
	for g := int64(0); g < goroutines; g++ {
		mine := n / goroutines
		if g < n%goroutines {
			mine++
		}
		go func(mine int64) {
			for i := int64(0); i < mine; i++ {
				mu.Lock()
				counter++
				mu.Unlock()
			}
			wg.Done()
		}(mine)
	}
	wg.Wait()
	ns := float64(time.Since(t0).Nanoseconds())
	verify("mutex", counter, n)
	result("mutex", variant(), "time", ns/1e6, "ms")
	result("mutex", variant(), "ns_per_increment", ns/float64(n), "ns")
}

func main() {
	flag.Parse()
	if flag.NArg() != 0 {
		usageError("unexpected argument: " + flag.Arg(0))
	}
	if *workersFlag < 0 {
		usageError("--workers must not be negative")
	}
	if *nFlag < 0 {
		usageError("--n must be positive")
	}
	switch *benchFlag {
	case "switch":
		benchSwitch()
	case "spawn":
		benchSpawn()
	case "skynet":
		benchSkynet()
	case "park_mem":
		benchParkMem()
	case "mutex":
		benchMutex()
	case "":
		usageError("--bench is required")
	default:
		usageError("unsupported bench: " + *benchFlag + " (go implements switch, spawn, skynet, park_mem, mutex)")
	}
}
