import CStrataZstd
import Foundation
import StrataStorage
import StrataTestSupport
import Testing


/// Text-like records that compress well and share structure (good dictionary material).
func sampleRecords(_ count: Int, seed: UInt64 = 1) -> [[UInt8]] {
    var rng = SeededGenerator(state: seed)
    let names = ["Ada", "Grace", "Linus", "Barbara", "Ken", "Dennis", "Margaret", "Edsger"]
    let teams = ["Falcons", "Otters", "Comets", "Herons"]
    return (0..<count).map { i in
        let name = names[Int(rng.next() % UInt64(names.count))]
        let team = teams[Int(rng.next() % UInt64(teams.count))]
        let age = 18 + rng.next() % 60
        return Array(
            "{\"entity\":\"Player\",\"id\":\(i),\"firstName\":\"\(name)\",\"lastName\":\"\(name)son\",\"age\":\(age),\"team\":\"\(team)\",\"email\":\"\(name.lowercased())\(i)@example.com\"}"
                .utf8)
    }
}

@Suite("zstd")
struct ZstdTests {
    @Test("error codes equal zstd's ZSTD_ErrorCode values")
    func errorCodeTable() {
        let table: [(ZstdError.Code, ZSTD_ErrorCode)] = [
            (.generic, ZSTD_error_GENERIC), (.unknownPrefix, ZSTD_error_prefix_unknown),
            (.versionUnsupported, ZSTD_error_version_unsupported),
            (.frameParameterUnsupported, ZSTD_error_frameParameter_unsupported),
            (.windowTooLarge, ZSTD_error_frameParameter_windowTooLarge),
            (.corruptionDetected, ZSTD_error_corruption_detected), (.checksumWrong, ZSTD_error_checksum_wrong),
            (.dictionaryCorrupted, ZSTD_error_dictionary_corrupted), (.dictionaryWrong, ZSTD_error_dictionary_wrong),
            (.dictionaryCreationFailed, ZSTD_error_dictionaryCreation_failed),
            (.memoryAllocation, ZSTD_error_memory_allocation), (.destinationTooSmall, ZSTD_error_dstSize_tooSmall),
            (.sourceSizeWrong, ZSTD_error_srcSize_wrong),
        ]
        for (code, constant) in table { #expect(code.rawValue == Int(constant.rawValue), "\(code)") }
    }

    @Test("one-shot round trip at several sizes and levels; frames carry content size", arguments: [0, 1, 100, 65_536, 1_000_003])
    func oneShotRoundTrip(size: Int) throws {
        var rng = SeededGenerator(state: UInt64(size) + 7)
        // Half random, half repetitive, so both paths of the compressor run.
        let input = (0..<size).map { i in i % 2 == 0 ? UInt8(truncatingIfNeeded: rng.next()) : UInt8(i % 7) }
        for level in [1, Zstd.defaultLevel, 19] {
            let frame = try Zstd.compress(input, level: level)
            #expect(try Zstd.frameContentSize(frame) == size)
            #expect(try Zstd.decompress(frame, maximumSize: size) == input)
        }
    }

    @Test("repetitive data compresses well")
    func ratio() throws {
        let input = sampleRecords(2000).flatMap { $0 }
        let frame = try Zstd.compress(input)
        #expect(frame.count * 4 < input.count)
    }

    @Test("streaming round trip in uneven chunks, with and without a pledged size")
    func streamingRoundTrip() throws {
        let input = sampleRecords(5000).flatMap { $0 }
        for pledged in [input.count, nil] {
            let compressor = try ZstdCompressionStream(level: 3, contentSize: pledged)
            var frame: [UInt8] = []
            var offset = 0
            var step = 1
            while offset < input.count {
                let end = min(offset + step, input.count)
                frame += try compressor.compress(Array(input[offset..<end]))
                offset = end
                step = step * 3 + 1
            }
            frame += try compressor.finish()
            #expect(try Zstd.frameContentSize(frame) == pledged)

            let decompressor = try ZstdDecompressionStream(maximumOutputSize: input.count)
            var output: [UInt8] = []
            for start in stride(from: 0, to: frame.count, by: 777) {
                output += try decompressor.decompress(Array(frame[start..<min(start + 777, frame.count)]))
            }
            try decompressor.finish()
            #expect(output == input)
            // The one-shot API reads a frame without a content size by streaming.
            #expect(try Zstd.decompress(frame, maximumSize: input.count) == input)
        }
    }

    @Test("a trained dictionary shrinks small records, and the frame needs it back")
    func dictionary() throws {
        let samples = sampleRecords(2000)
        let dictionary = try ZstdDictionary.train(samples: samples, capacity: 16 << 10)
        #expect(dictionary.bytes.count <= 16 << 10)
        #expect(dictionary.id != 0)

        let record = sampleRecords(1, seed: 99)[0]
        let plain = try Zstd.compress(record)
        let withDictionary = try Zstd.compress(record, dictionary: dictionary)
        #expect(withDictionary.count < plain.count)
        #expect(Zstd.dictionaryID(ofFrame: withDictionary) == dictionary.id)
        #expect(try Zstd.decompress(withDictionary, maximumSize: 4096, dictionary: dictionary) == record)

        let missing = #expect(throws: ZstdError.self) { _ = try Zstd.decompress(withDictionary, maximumSize: 4096) }
        #expect(missing?.code == .dictionaryWrong)

        // Streaming with a dictionary too.
        let stream = try ZstdCompressionStream(dictionary: dictionary, contentSize: record.count)
        let frame = try stream.compress(record) + stream.finish()
        let reader = try ZstdDecompressionStream(maximumOutputSize: 4096, dictionary: dictionary)
        #expect(try reader.decompress(frame) == record)
    }

    @Test("training with too few samples fails clearly")
    func trainingNeedsSamples() throws {
        let error = #expect(throws: ZstdError.self) { _ = try ZstdDictionary.train(samples: [[1, 2, 3]]) }
        #expect(error?.code == .trainingFailed)
        #expect(error?.message.contains("samples") == true)
    }

    @Test("a decompression bomb is refused by the bound before anything large is allocated")
    func bombRejectedByClaimedSize() throws {
        let zeros = [UInt8](repeating: 0, count: 256 << 20)
        let bomb = try Zstd.compress(zeros, level: 1)
        #expect(bomb.count < 64 << 10)
        let error = #expect(throws: ZstdError.self) { _ = try Zstd.decompress(bomb, maximumSize: 1 << 20) }
        #expect(error?.code == .exceedsBound)
        #expect(error?.message.contains("\(256 << 20)") == true)
    }

    @Test("a bomb without a content size is stopped by the bound while streaming")
    func bombRejectedWhileStreaming() throws {
        let stream = try ZstdCompressionStream(level: 1)  // no pledged size: no content size in the header
        var bomb: [UInt8] = []
        let chunk = [UInt8](repeating: 0, count: 1 << 20)
        for _ in 0..<64 { bomb += try stream.compress(chunk) }
        bomb += try stream.finish()
        #expect(try Zstd.frameContentSize(bomb) == nil)
        let error = #expect(throws: ZstdError.self) { _ = try Zstd.decompress(bomb, maximumSize: 2 << 20) }
        #expect(error?.code == .exceedsBound)
    }

    @Test("random bytes, empty input and every truncation are errors, never crashes")
    func garbageRejected() throws {
        var rng = SeededGenerator(state: 42)
        for length in [1, 4, 5, 9, 64, 4096] {
            let garbage = (0..<length).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            #expect(throws: ZstdError.self) { _ = try Zstd.decompress(garbage, maximumSize: 1 << 20) }
        }
        let empty = #expect(throws: ZstdError.self) { _ = try Zstd.decompress([UInt8](), maximumSize: 10) }
        #expect(empty?.code == .emptyInput)

        let input = sampleRecords(50).flatMap { $0 }
        let frame = try Zstd.compress(input)
        for cut in 1..<frame.count {
            #expect(throws: ZstdError.self, "cut at \(cut)") {
                _ = try Zstd.decompress(Array(frame[0..<cut]), maximumSize: input.count)
            }
        }
        // The streaming reader notices a cut-off frame at finish.
        let reader = try ZstdDecompressionStream(maximumOutputSize: input.count)
        _ = try reader.decompress(Array(frame[0..<(frame.count / 2)]))
        let truncated = #expect(throws: ZstdError.self) { try reader.finish() }
        #expect(truncated?.code == .truncated)
    }

    @Test("flipped bits are caught (corruption or checksum), never returned as data")
    func bitFlipsRejected() throws {
        let input = sampleRecords(200).flatMap { $0 }
        let frame = try Zstd.compress(input)
        var rng = SeededGenerator(state: 7)
        var caught = 0
        for _ in 0..<300 {
            var damaged = frame
            let position = Int(rng.next() % UInt64(frame.count))
            damaged[position] ^= UInt8(1 << (rng.next() % 8))
            do {
                let output = try Zstd.decompress(damaged, maximumSize: input.count * 2)
                // A flip in a field zstd ignores may decode fine, but then the bytes must be right.
                #expect(output == input, "flip at \(position) returned wrong data")
            } catch is ZstdError {
                caught += 1
            }
        }
        #expect(caught > 250)
    }

    @Test("Strata's frames pass `zstd -t` and decompress with `zstd -dc`; the CLI's frames read back")
    func interoperatesWithTheZstdCLI() throws {
        try #require(toolIsInstalled("zstd"), "the zstd CLI is required (.ci/run installs it)")
        let dir = try TemporaryDirectory()
        let input = sampleRecords(3000).flatMap { $0 }
        let framePath = dir.file("records.zst")
        try Data(try Zstd.compress(input, level: 5)).write(to: URL(fileURLWithPath: framePath))

        let zstd = URL(fileURLWithPath: "/usr/bin/env")
        let test = try runProcess(zstd, ["zstd", "-t", framePath])
        #expect(test.status == 0, "zstd -t: \(test.standardError)")
        let listing = try runProcess(zstd, ["zstd", "-lv", framePath])
        #expect(listing.standardOutput.contains("XXH64"), "frames carry a content checksum: \(listing.standardOutput)")
        let decoded = try runProcess(zstd, ["zstd", "-dc", framePath])
        #expect(decoded.status == 0)
        #expect(Array(decoded.standardOutput.utf8) == input)

        // Dictionary frames decode with `zstd -D`.
        let dictionary = try ZstdDictionary.train(samples: sampleRecords(2000), capacity: 8 << 10)
        let dictPath = dir.file("dict")
        try Data(dictionary.bytes).write(to: URL(fileURLWithPath: dictPath))
        let record = sampleRecords(1, seed: 5)[0]
        let dictFramePath = dir.file("record.zst")
        try Data(try Zstd.compress(record, dictionary: dictionary)).write(to: URL(fileURLWithPath: dictFramePath))
        let withDict = try runProcess(zstd, ["zstd", "-D", dictPath, "-dc", dictFramePath])
        #expect(withDict.status == 0, "\(withDict.standardError)")
        #expect(Array(withDict.standardOutput.utf8) == record)

        // The other way: a frame from the stock CLI (from a pipe, so no content size).
        let plainPath = dir.file("plain.txt")
        try Data(input).write(to: URL(fileURLWithPath: plainPath))
        let cliFrame = try runProcess(
            URL(fileURLWithPath: "/bin/sh"), ["-c", "cat '\(plainPath)' | zstd -q -c > '\(dir.file("cli.zst"))'"])
        #expect(cliFrame.status == 0)
        let bytesFromCLI = try [UInt8](Data(contentsOf: URL(fileURLWithPath: dir.file("cli.zst"))))
        #expect(try Zstd.decompress(bytesFromCLI, maximumSize: input.count) == input)
    }
}
