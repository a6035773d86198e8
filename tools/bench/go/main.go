// Go side of weft's side-by-side benchmarks (tools/bench/compare). Same definitions, command line
// and RESULT lines as the C++ programs (see tools/bench/bench_util.hpp), written the way Go is
// usually written, so the comparison is against idiomatic Go:
//
//	switch   GOMAXPROCS(1), two goroutines ping-pong with runtime.Gosched(); ns per Gosched.
//	         Gosched puts the goroutine on the global run queue: that is the definition.
//	spawn    one goroutine starts N empty goroutines, a sync.WaitGroup waits; ns per spawn, peak RSS
//	skynet   the classic goroutine + unbuffered channel skynet; sum verified; ms, peak RSS
//	park_mem N goroutines each blocked on its own chan struct{}; statm RSS delta per goroutine, and
//	         ns per goroutine from the first go statement until the last one started
//	park_idle the same read after 3 s parked, after debug.FreeOSMemory()
//	mutex    4*GOMAXPROCS goroutines increment one counter under sync.Mutex; count verified
//	chan_pingpong two goroutines, two unbuffered chan int: one sends i on ping and waits for the
//	         reply on pong, the other echoes; N round trips; sum of the replies verified; ns per round
//	         trip. Run with GOMAXPROCS 1 and 2: Go decides itself where the two goroutines run
//	chan_mpmc 4 producers send disjoint ranges of 0..N-1 into one chan int of capacity 1024, 4
//	         consumers receive until it is closed and sum; sum and count verified; ns per item
//	select2  two producers each send half of 0..N-1 into their own chan int of capacity 128; one
//	         consumer runs N selects over both; sum verified; ns per select
//
// Worker count = GOMAXPROCS; --workers=0 means all CPUs (runtime.NumCPU()).
//
// Build: cd tools/bench/go && go build -o OUT .
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

	chanPingPongN = 1_000_000  // round trips
	chanMPMCN     = 10_000_000 // items in total
	select2N      = 2_000_000  // selects (items in total)
	ctxN          = 1_000_000  // contexts created and cancelled
	rwN           = 8_000_000  // read sections in total
	rwWriteEvery  = 100        // one write section per 100 reads
	rwReaders     = 8
	localN        = 10_000_000 // request-scoped value reads
	selectCtxN    = 2_000_000  // selects

	mpmcProducers = 4
	mpmcConsumers = 4
	mpmcCapacity  = 1024
	select2Cap    = 128
)

var (
	benchFlag   = flag.String("bench", "", "switch, spawn, skynet, park_mem, park_idle, mutex, chan_pingpong, chan_mpmc, select2, ctx, rwmutex, fiber_local or select_ctx")
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

func benchParkMem() { parkRSS("park_mem", 20*time.Millisecond, false) }

// parkRSS: park_mem, or park_idle: read after settle, with the heap returned first (FreeOSMemory),
// as weft's figure is read after its stacks were hibernated.
func parkRSS(name string, settle time.Duration, free bool) {
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
	t0 := time.Now()
	for i := range chans {
		go func(ch chan struct{}) {
			started.Done()
			<-ch
			finished.Done()
		}(chans[i])
	}
	started.Wait()
	parkNs := float64(time.Since(t0).Nanoseconds()) / float64(n)
	// The last goroutine to start is a few instructions from parking; give it time to get there.
	time.Sleep(settle)
	if free {
		debug.FreeOSMemory()
	}
	parked := currentRSSBytes()
	for _, ch := range chans {
		close(ch)
	}
	finished.Wait()
	result(name, variant(), "bytes_per_fiber", float64(parked-before)/float64(n), "B")
	result(name, variant(), "park_ns", parkNs, "ns")
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

// n*(n-1)/2, the sum of 0..n-1, which every channel bench sends.
func sumBelow(n int64) int64 { return n * (n - 1) / 2 }

func benchChanPingPong() {
	runtime.GOMAXPROCS(resolveWorkers())
	n := int(sizeOr(chanPingPongN))
	ping, pong := make(chan int), make(chan int)
	var sum int64
	var wg sync.WaitGroup
	wg.Add(2)
	t0 := time.Now()
	go func() { // the echo
		for i := 0; i < n; i++ {
			pong <- <-ping
		}
		wg.Done()
	}()
	go func() {
		for i := 0; i < n; i++ {
			ping <- i
			sum += int64(<-pong)
		}
		wg.Done()
	}()
	wg.Wait()
	ns := float64(time.Since(t0).Nanoseconds())
	verify("chan_pingpong", sum, sumBelow(int64(n)))
	result("chan_pingpong", variant(), "ns_per_roundtrip", ns/float64(n), "ns")
}

func benchChanMPMC() {
	runtime.GOMAXPROCS(resolveWorkers())
	n := sizeOr(chanMPMCN)
	ch := make(chan int, mpmcCapacity)
	sums := make([]int64, mpmcConsumers)
	counts := make([]int64, mpmcConsumers)
	var producers, consumers sync.WaitGroup
	producers.Add(mpmcProducers)
	consumers.Add(mpmcConsumers)
	t0 := time.Now()
	for c := 0; c < mpmcConsumers; c++ {
		go func(c int) {
			var sum, count int64
			for v := range ch {
				sum += int64(v)
				count++
			}
			sums[c], counts[c] = sum, count
			consumers.Done()
		}(c)
	}
	for p := int64(0); p < mpmcProducers; p++ {
		go func(lo, hi int) {
			for i := lo; i < hi; i++ {
				ch <- i
			}
			producers.Done()
		}(int(n*p/mpmcProducers), int(n*(p+1)/mpmcProducers))
	}
	producers.Wait()
	close(ch)
	consumers.Wait()
	ns := float64(time.Since(t0).Nanoseconds())
	var sum, count int64
	for c := 0; c < mpmcConsumers; c++ {
		sum += sums[c]
		count += counts[c]
	}
	verify("chan_mpmc", count, n)
	verify("chan_mpmc", sum, sumBelow(n))
	result("chan_mpmc", variant(), "ns_per_item", ns/float64(n), "ns")
}

func benchSelect2() {
	runtime.GOMAXPROCS(resolveWorkers())
	n := int(sizeOr(select2N))
	a, b := make(chan int, select2Cap), make(chan int, select2Cap)
	var sum int64
	var wg sync.WaitGroup
	wg.Add(3)
	send := func(ch chan int, lo, hi int) {
		for i := lo; i < hi; i++ {
			ch <- i
		}
		wg.Done()
	}
	t0 := time.Now()
	go func() { // the consumer
		for i := 0; i < n; i++ {
			select {
			case v := <-a:
				sum += int64(v)
			case v := <-b:
				sum += int64(v)
			}
		}
		wg.Done()
	}()
	go send(a, 0, n/2)
	go send(b, n/2, n)
	wg.Wait()
	ns := float64(time.Since(t0).Nanoseconds())
	verify("select2", sum, sumBelow(int64(n)))
	result("select2", variant(), "ns_per_select", ns/float64(n), "ns")
}

func benchCtx() {
	runtime.GOMAXPROCS(resolveWorkers())
	n := sizeOr(ctxN)
	parent, cancelParent := context.WithCancel(context.Background())
	t0 := time.Now()
	for i := int64(0); i < n; i++ {
		_, cancel := context.WithCancel(parent)
		cancel()
	}
	ns := float64(time.Since(t0).Nanoseconds())
	cancelParent()
	result("ctx", variant(), "ns_per_create_cancel", ns/float64(n), "ns")
}

func benchRWMutex() {
	runtime.GOMAXPROCS(resolveWorkers())
	n := sizeOr(rwN)
	writes := n / rwWriteEvery
	var mu sync.RWMutex
	var counter int64
	var reads int64
	var wg sync.WaitGroup
	wg.Add(rwReaders + 1)
	t0 := time.Now()
	for r := int64(0); r < rwReaders; r++ {
		mine := n / rwReaders
		if r < n%rwReaders {
			mine++
		}
		go func(mine int64) {
			var seen int64
			for i := int64(0); i < mine; i++ {
				mu.RLock()
				if counter >= 0 {
					seen++
				}
				mu.RUnlock()
			}
			atomic.AddInt64(&reads, seen)
			wg.Done()
		}(mine)
	}
	go func() {
		for i := int64(0); i < writes; i++ {
			mu.Lock()
			counter++
			mu.Unlock()
		}
		wg.Done()
	}()
	wg.Wait()
	ns := float64(time.Since(t0).Nanoseconds())
	verify("rwmutex", counter, writes)
	verify("rwmutex", reads, n)
	result("rwmutex", variant(), "ns_per_section", ns/float64(n+writes), "ns")
}

type localKey struct{}

// Go has no goroutine-local storage; its idiom for a request-scoped value is ctx.Value.
func benchFiberLocal() {
	runtime.GOMAXPROCS(resolveWorkers())
	n := sizeOr(localN)
	ctx := context.WithValue(context.Background(), localKey{}, int64(1))
	var sum int64
	t0 := time.Now()
	for i := int64(0); i < n; i++ {
		sum += ctx.Value(localKey{}).(int64)
	}
	ns := float64(time.Since(t0).Nanoseconds())
	verify("fiber_local", sum, n)
	result("fiber_local", variant(), "ns_per_get", ns/float64(n), "ns")
}

func benchSelectCtx() {
	runtime.GOMAXPROCS(resolveWorkers())
	n := int(sizeOr(selectCtxN))
	ch := make(chan int, select2Cap)
	ctx, cancel := context.WithCancel(context.Background())
	var sum int64
	var wg sync.WaitGroup
	wg.Add(2)
	t0 := time.Now()
	go func() { // the consumer
		done := ctx.Done()
		for i := 0; i < n; i++ {
			select {
			case v := <-ch:
				sum += int64(v)
			case <-done:
			}
		}
		wg.Done()
	}()
	go func() {
		for i := 0; i < n; i++ {
			ch <- i
		}
		wg.Done()
	}()
	wg.Wait()
	ns := float64(time.Since(t0).Nanoseconds())
	cancel()
	verify("select_ctx", sum, sumBelow(int64(n)))
	result("select_ctx", variant(), "ns_per_select", ns/float64(n), "ns")
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
	case "park_idle":
		settle := 3 * time.Second
		if *nFlag > 0 && *nFlag < 10000 {
			settle = 1500 * time.Millisecond
		}
		parkRSS("park_idle", settle, true)
	case "mutex":
		benchMutex()
	case "chan_pingpong":
		benchChanPingPong()
	case "chan_mpmc":
		benchChanMPMC()
	case "select2":
		benchSelect2()
	case "ctx":
		benchCtx()
	case "rwmutex":
		benchRWMutex()
	case "fiber_local":
		benchFiberLocal()
	case "select_ctx":
		benchSelectCtx()
	case "":
		usageError("--bench is required")
	default:
		usageError("unsupported bench: " + *benchFlag + " (go implements switch, spawn, skynet, park_mem, park_idle, mutex, chan_pingpong, chan_mpmc, select2, ctx, rwmutex, fiber_local, select_ctx)")
	}
}
