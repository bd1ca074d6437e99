import StrataLog
import StrataTestSupport
import Testing

@Suite("Name lookup")
struct NameLookupTests {
    @Test("finds each name's position as a dictionary would: every length, shared lengths, non-ASCII, long names, absent keys")
    func matchesDictionary() {
        var generator = SeededGenerator(seed: 0x4E41_4D45)
        let alphabet = Array("abcdefghijklmnopqrstuvwxyzAZé_0")
        for _ in 0..<200 {
            var names: [String] = []
            var expected: [String: Int] = [:]
            for _ in 0..<Int.random(in: 0...24, using: &generator) {
                let name = String((0..<Int.random(in: 0...20, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! })
                guard expected[name] == nil else { continue }
                expected[name] = names.count
                names.append(name)
            }
            let lookup = NameLookup(names)
            for name in names { #expect(lookup.position(of: name) == expected[name], "\(name) in \(names)") }
            // Built at run time, so not the same string in memory as the name it equals.
            for name in names { #expect(lookup.position(of: String(Array(name))) == expected[name]) }
            for _ in 0..<20 {
                let probe = String((0..<Int.random(in: 0...22, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! })
                #expect(lookup.position(of: probe) == expected[probe], "\(probe) in \(names)")
            }
        }
    }
}
