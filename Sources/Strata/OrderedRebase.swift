/// A change of an ordered to-many applied to another value of the list (spec 0006 §18.3, a
/// child's push into its parent; §16.1, a merge re-applying unsaved changes to the store's
/// list): what `ours` did to `base` — the members it removed, inserted and moved — done to
/// `theirs`, the list as it is now.
///
/// - Removed: the members of `base` that `ours` doesn't list leave `theirs`.
/// - Moved: of the members `ours` kept from `base`, those outside a longest subsequence
///   that keeps `base`'s order (the fewest members whose moving explains `ours`' order).
/// - Inserted: the members of `ours` that `base` doesn't list.
/// - Every inserted or moved member goes right before the nearest member following it in
///   `ours` that the result otherwise keeps, at the end when none follows (an appended
///   member stays last); runs of them keep `ours`' order.
/// - Members `theirs` added stay where `theirs` has them; one `theirs` removed that `ours`
///   only kept or moved stays out; one both inserted stays where `theirs` has it.
///
/// `ours == base` gives `theirs` exactly; `theirs == base` gives `ours`.
enum OrderedRebase {
    static func rebase<Member: Hashable>(base: [Member], ours: [Member], onto theirs: [Member]) -> [Member] {
        if ours == base { return theirs }
        if theirs == base { return ours }
        var seen: Set<Member> = []
        let ours = ours.filter { seen.insert($0).inserted }
        var baseIndex: [Member: Int] = [:]
        baseIndex.reserveCapacity(base.count)
        for (index, member) in base.enumerated() where baseIndex[member] == nil { baseIndex[member] = index }
        let mine = Set(ours)
        let removed = Set(base.filter { !mine.contains($0) })
        // The members ours kept from base, in ours' order, with their places in base.
        let kept: [(member: Member, index: Int)] = ours.compactMap { member in baseIndex[member].map { (member, $0) } }
        let staying = longestIncreasing(kept.map(\.index))
        var moved: Set<Member> = []
        for (position, entry) in kept.enumerated() where !staying.contains(position) { moved.insert(entry.member) }
        let present = Set(theirs)
        // Put in anew: the members ours inserted (unless theirs has them too) and those it moved
        // (unless theirs removed them).
        var placed: Set<Member> = []
        for member in ours where present.contains(member) ? moved.contains(member) : baseIndex[member] == nil {
            placed.insert(member)
        }
        let remaining = theirs.filter { !removed.contains($0) && !placed.contains($0) }
        let anchors = Set(remaining)
        var runs: [Member: [Member]] = [:]
        var atEnd: [Member] = []
        var following: Member?
        for member in ours.reversed() {
            if placed.contains(member) {
                if let following { runs[following, default: []].append(member) } else { atEnd.append(member) }
            } else if anchors.contains(member) {
                following = member
            }
        }
        var result: [Member] = []
        result.reserveCapacity(remaining.count + placed.count)
        for member in remaining {
            if let run = runs[member] { result += run.reversed() }
            result.append(member)
        }
        result += atEnd.reversed()
        return result
    }

    /// The positions of a longest strictly increasing subsequence of `values` (also what a
    /// fetched results controller keeps in place when it reports moves).
    static func longestIncreasing(_ values: [Int]) -> Set<Int> {
        var tails: [Int] = []  // positions: the smallest last value of a run of each length
        var previous = [Int](repeating: -1, count: values.count)
        for (position, value) in values.enumerated() {
            var low = 0, high = tails.count
            while low < high {
                let middle = (low + high) / 2
                if values[tails[middle]] < value { low = middle + 1 } else { high = middle }
            }
            if low > 0 { previous[position] = tails[low - 1] }
            if low == tails.count { tails.append(position) } else { tails[low] = position }
        }
        var result: Set<Int> = []
        var position = tails.last ?? -1
        while position >= 0 {
            result.insert(position)
            position = previous[position]
        }
        return result
    }
}
