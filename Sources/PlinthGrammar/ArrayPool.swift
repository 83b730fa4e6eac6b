import Synchronization

/// Arrays handed out clean (every element `clean`) and taken back clean, so that hot paths
/// reuse large buffers instead of allocating and filling them again. Keeps the `limit` largest.
final class ArrayPool<Element: Sendable>: Sendable {
    let clean: Element
    let limit: Int
    private let arrays = Mutex<[[Element]]>([])

    init(clean: Element, limit: Int) {
        self.clean = clean
        self.limit = limit
    }

    /// The smallest pooled array of at least `count` elements, or a new one of `count`.
    func take(_ count: Int) -> [Element] {
        let pooled = arrays.withLock { p -> [Element]? in
            p.indices.filter { p[$0].count >= count }.min { p[$0].count < p[$1].count }.map { p.remove(at: $0) }
        }
        return pooled ?? [Element](repeating: clean, count: count)
    }

    /// Takes back an array whose elements are all `clean` again.
    func giveBack(_ array: [Element]) {
        arrays.withLock { p in
            p.append(array)
            if p.count > limit, let i = p.indices.min(by: { p[$0].count < p[$1].count }) { p.remove(at: i) }
        }
    }
}
