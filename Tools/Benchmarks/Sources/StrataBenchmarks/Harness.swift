import Foundation

// MARK: - Timing

/// The samples of one measured body: every repetition after the warm-up.
struct Stats {
    let samples: [Duration]

    var median: Duration {
        let sorted = samples.sorted()
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }

    var min: Duration { samples.min() ?? .zero }

    var medianSeconds: Double { median.seconds }
    var minSeconds: Double { min.seconds }
}

extension Duration {
    var seconds: Double {
        let (s, atto) = components
        return Double(s) + Double(atto) * 1e-18
    }
}

/// Runs `setup`, times `body` with the monotonic clock, then runs `teardown`: `warmup`
/// untimed rounds first, then `repetitions` timed ones. Setup and teardown are never timed.
func measure<State>(
    _ label: String,
    warmup: Int = 1,
    repetitions: Int,
    setup: () throws -> State,
    body: (inout State) throws -> Void,
    teardown: (inout State) throws -> Void = { _ in }
) throws -> Stats {
    let clock = ContinuousClock()
    var samples: [Duration] = []
    for round in 0..<(warmup + repetitions) {
        var state = try setup()
        let start = clock.now
        try body(&state)
        let elapsed = clock.now - start
        try teardown(&state)
        if round >= warmup { samples.append(elapsed) }
    }
    let stats = Stats(samples: samples)
    report(label, stats)
    return stats
}

/// One timed round: `setup` and `teardown` untimed, `body` timed.
func timedRound<State>(
    setup: () throws -> State, body: (inout State) throws -> Void, teardown: (inout State) throws -> Void = { _ in }
) throws -> Duration {
    let clock = ContinuousClock()
    var state = try setup()
    let start = clock.now
    try body(&state)
    let elapsed = clock.now - start
    try teardown(&state)
    return elapsed
}

/// Times two peers alternately, round by round (A, B, A, B, …, after `warmup` untimed
/// pairs), so a change in the machine's speed during the run falls on both alike. Returns
/// both peers' samples and the median of the per-round ratios A ÷ B — the figure to quote
/// on a machine whose speed drifts (a shared VM).
func measureAlternately(
    _ labelA: String, _ labelB: String, warmup: Int = 1, repetitions: Int,
    _ a: () throws -> Duration, _ b: () throws -> Duration
) throws -> (a: Stats, b: Stats, pairedRatio: Double) {
    var samplesA: [Duration] = []
    var samplesB: [Duration] = []
    for round in 0..<(warmup + repetitions) {
        let timeA = try a()
        let timeB = try b()
        if round >= warmup {
            samplesA.append(timeA)
            samplesB.append(timeB)
        }
    }
    let statsA = Stats(samples: samplesA), statsB = Stats(samples: samplesB)
    report(labelA, statsA)
    report(labelB, statsB)
    let ratios = zip(samplesA, samplesB).map { $0.seconds / max($1.seconds, 1e-12) }.sorted()
    let middle = ratios.count / 2
    let paired = ratios.isEmpty ? 0 : (ratios.count % 2 == 1 ? ratios[middle] : (ratios[middle - 1] + ratios[middle]) / 2)
    return (statsA, statsB, paired)
}

/// Times `body` once (for destructive work such as compaction).
func timeOnce<R>(_ body: () throws -> R) rethrows -> (R, Duration) {
    let clock = ContinuousClock()
    let start = clock.now
    let result = try body()
    return (result, clock.now - start)
}

// MARK: - Reporting

/// Writes a line to standard output at once (unbuffered, even into a file or a pipe), so
/// progress shows while a long run goes on.
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// Collects every figure so the run ends with one summary table.
nonisolated(unsafe) var summary: [(benchmark: String, figure: String, value: String, target: String)] = []

func record(_ benchmark: String, _ figure: String, _ value: String, target: String = "") {
    summary.append((benchmark, figure, value, target))
}

func report(_ label: String, _ stats: Stats) {
    let line = "  \(label.padding(toLength: 52, withPad: " ", startingAt: 0)) median \(format(stats.median).leftPadded(10))"
        + "   min \(format(stats.min).leftPadded(10))   (\(stats.samples.count) runs)"
    say(line)
}

func format(_ duration: Duration) -> String { format(seconds: duration.seconds) }

func format(seconds s: Double) -> String {
    if s >= 1 { return String(format: "%.2f s", s) }
    if s >= 1e-3 { return String(format: "%.1f ms", s * 1e3) }
    return String(format: "%.1f µs", s * 1e6)
}

func ratio(_ a: Double, _ b: Double) -> String { b == 0 ? "n/a" : String(format: "%.2f×", a / b) }

func rate(_ count: Double, perSeconds s: Double) -> String {
    let r = count / s
    if r >= 1e6 { return String(format: "%.2f M/s", r / 1e6) }
    if r >= 1e3 { return String(format: "%.1f k/s", r / 1e3) }
    return String(format: "%.0f /s", r)
}

func megabytes(_ bytes: Int) -> String { String(format: "%.1f MB", Double(bytes) / 1e6) }

func heading(_ title: String) {
    say("\n== \(title)")
}

extension String {
    func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}

// MARK: - Environment knobs

/// An integer from the environment, or `fallback`.
func environmentInt(_ name: String, _ fallback: Int) -> Int {
    guard let text = ProcessInfo.processInfo.environment[name]?.replacingOccurrences(of: "_", with: ""),
        let value = Int(text), value > 0
    else { return fallback }
    return value
}

func environmentString(_ name: String) -> String? {
    guard let value = ProcessInfo.processInfo.environment[name], !value.isEmpty else { return nil }
    return value
}

// MARK: - Scratch directories

/// A fresh directory under `base` (the system temporary directory by default); removed by `remove`.
func scratchDirectory(_ label: String, base: String? = nil) throws -> String {
    let root = base ?? environmentString("STRATA_BENCH_DIR") ?? FileManager.default.temporaryDirectory.path
    let path = (root as NSString).appendingPathComponent("strata-bench-\(label)-\(UUID().uuidString.prefix(8))")
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

func remove(_ path: String) {
    try? FileManager.default.removeItem(atPath: path)
}

/// Bytes in every regular file under `path`.
func directorySize(_ path: String) -> Int {
    guard let walker = FileManager.default.enumerator(atPath: path) else { return 0 }
    var total = 0
    while let name = walker.nextObject() as? String {
        let full = (path as NSString).appendingPathComponent(name)
        if let attributes = try? FileManager.default.attributesOfItem(atPath: full),
            attributes[.type] as? FileAttributeType == .typeRegular,
            let size = attributes[.size] as? NSNumber
        {
            total += size.intValue
        }
    }
    return total
}

/// A small deterministic generator (SplitMix64), so every peer gets the same data every run.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
