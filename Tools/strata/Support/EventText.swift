import Strata

/// The text form of transactions that `strata log` and `strata replay --step` print.
enum EventText {
    /// The header line: `#12  2026-01-01T10:00:00.000000Z  save  author alice  context editor  pid 42  model 1`.
    static func header(_ event: TransactionEvent) -> String {
        var parts = ["#\(event.sequence)", Timestamps.format(event.timestamp), kind(event.kind)]
        if let author = event.author { parts.append("author \(ValueRendering.oneLine(author))") }
        if let context = event.contextName { parts.append("context \(ValueRendering.oneLine(context))") }
        parts.append("pid \(event.processID)")
        parts.append("model \(event.modelVersion)")
        return parts.joined(separator: "  ")
    }

    /// `save`, `undo of 12`, `redo of 12 (group 1)`, `migration`, `import`.
    static func kind(_ kind: TransactionKind) -> String {
        switch kind {
        case .undo(let of, let group): group == 0 ? "undo of \(of)" : "undo of \(of) (group \(group))"
        case .redo(let of, let group): group == 0 ? "redo of \(of)" : "redo of \(of) (group \(group))"
        default: kind.description
        }
    }

    /// Every line of `event` with only `groups`: header, group names, changes and property lines.
    static func lines(_ event: TransactionEvent, groups: [ChangeGroup], _ log: EventLog) -> [String] {
        var lines = [header(event)]
        for group in groups {
            if let name = group.actionName { lines.append("  action \(ValueRendering.jsonString(name))") }
            // Changes the saving context's undo journal didn't record (registration off,
            // primitive sets such as a willSave timestamp): no undo step brings them back.
            if !group.isRecordedForUndo { lines.append("  not recorded for undo") }
            for change in group.changes { lines.append(contentsOf: self.lines(change, log)) }
        }
        return lines
    }

    /// `  insert URI` then `    property: before → after` per property.
    static func lines(_ change: Change, _ log: EventLog) -> [String] {
        switch change {
        case .insert(let id, let values):
            return ["  insert \(log.uri(id))"] + values.keys.sorted().map { name in
                "    \(name): nil → \(ValueRendering.text(values[name] ?? .null, log))"
            }
        case .update(let id, let changes):
            return ["  update \(log.uri(id))"] + changes.map { change in
                switch change {
                case .value(let property, let before, let after):
                    "    \(property): \(ValueRendering.text(before, log)) → \(ValueRendering.text(after, log))"
                case .membership(let property, let added, let removed):
                    "    \(property):" + added.map { " +\(log.uri($0))" }.joined() + removed.map { " -\(log.uri($0))" }.joined()
                }
            }
        case .delete(let id, let before):
            return ["  delete \(log.uri(id))"] + before.keys.sorted().map { name in
                "    \(name): \(ValueRendering.text(before[name] ?? .null, log)) → nil"
            }
        }
    }
}
