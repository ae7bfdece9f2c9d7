//! Small graph algorithms shared by the analyses (imports, definitions,
//! ordering): strongly connected components and one cycle through each.

/// Every cycle of a directed graph given as adjacency lists: one cycle per
/// strongly connected component that has one (a component of several nodes,
/// or a node with an edge to itself). Each cycle lists its nodes in edge
/// order, starting from the smallest node, without repeating it at the end.
/// Iterative Tarjan, so deep graphs do not overflow the stack.
pub fn cycles(graph: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    for component in components(graph, false) {
        let Some(&start) = component.iter().min() else {
            continue;
        };
        let self_loop = graph.get(start).is_some_and(|e| e.contains(&start));
        if component.len() == 1 && !self_loop {
            continue;
        }
        if let Some(path) = path_within(graph, &component, start) {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// Tarjan's algorithm, iteratively. Components come out in reverse
/// topological order.
pub fn strongly_connected(graph: &[Vec<usize>]) -> Vec<Vec<usize>> {
    components(graph, true)
}

/// [`strongly_connected`]; without `trivial`, only the components that
/// hold a cycle (several nodes, or one with an edge to itself): an acyclic
/// graph of a million nodes makes no list at all.
fn components(graph: &[Vec<usize>], trivial: bool) -> Vec<Vec<usize>> {
    let n = graph.len();
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0usize; n];
    let mut on_stack = vec![false; n];
    let mut stack: Vec<usize> = Vec::new();
    let mut components = Vec::new();
    let mut next_index = 0usize;
    let mut work: Vec<(usize, usize)> = Vec::new();
    for root in 0..n {
        if index.get(root) != Some(&usize::MAX) {
            continue;
        }
        // (node, position in its adjacency list)
        work.clear();
        work.push((root, 0));
        while let Some(&(node, pos)) = work.last() {
            if pos == 0 && index.get(node) == Some(&usize::MAX) {
                set(&mut index, node, next_index);
                set(&mut low, node, next_index);
                next_index += 1;
                stack.push(node);
                set(&mut on_stack, node, true);
            }
            let edges = graph.get(node).map(Vec::as_slice).unwrap_or(&[]);
            if let Some(&next) = edges.get(pos) {
                if let Some(top) = work.last_mut() {
                    top.1 += 1;
                }
                if next >= n {
                    continue;
                }
                if index.get(next) == Some(&usize::MAX) {
                    work.push((next, 0));
                } else if on_stack.get(next) == Some(&true) {
                    let l = get(&low, node).min(get(&index, next));
                    set(&mut low, node, l);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                let l = get(&low, parent).min(get(&low, node));
                set(&mut low, parent, l);
            }
            if get(&low, node) == get(&index, node) {
                if stack.last() == Some(&node) {
                    // A component of one node: a cycle only through an
                    // edge to itself.
                    stack.pop();
                    set(&mut on_stack, node, false);
                    let self_loop = graph.get(node).is_some_and(|edges| edges.contains(&node));
                    if trivial || self_loop {
                        components.push(vec![node]);
                    }
                    continue;
                }
                let mut component = Vec::new();
                while let Some(member) = stack.pop() {
                    set(&mut on_stack, member, false);
                    component.push(member);
                    if member == node {
                        break;
                    }
                }
                component.sort_unstable();
                components.push(component);
            }
        }
    }
    components
}

fn get<T: Copy + Default>(v: &[T], i: usize) -> T {
    v.get(i).copied().unwrap_or_default()
}

fn set<T>(v: &mut [T], i: usize, value: T) {
    if let Some(slot) = v.get_mut(i) {
        *slot = value;
    }
}

/// A shortest cycle from `start` back to itself, staying inside `component`
/// (breadth-first, so the reported cycle is as short as possible).
fn path_within(graph: &[Vec<usize>], component: &[usize], start: usize) -> Option<Vec<usize>> {
    use std::collections::{HashMap, VecDeque};
    let mut parent: HashMap<usize, usize> = HashMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(node) = queue.pop_front() {
        for &next in graph.get(node).map(Vec::as_slice).unwrap_or(&[]) {
            if component.binary_search(&next).is_err() {
                continue;
            }
            if next == start {
                let mut path = vec![node];
                let mut cur = node;
                while cur != start {
                    cur = *parent.get(&cur)?;
                    path.push(cur);
                }
                path.reverse();
                return Some(path);
            }
            if let std::collections::hash_map::Entry::Vacant(e) = parent.entry(next) {
                e.insert(node);
                queue.push_back(next);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_each_cycle_once() {
        // 0 -> 1 -> 2 -> 0, 3 -> 3, 4 -> 5 (no cycle)
        let g = vec![vec![1], vec![2], vec![0], vec![3], vec![5], vec![]];
        assert_eq!(cycles(&g), vec![vec![0, 1, 2], vec![3]]);
    }

    #[test]
    fn acyclic_graph_has_none() {
        let g = vec![vec![1, 2], vec![2], vec![]];
        assert!(cycles(&g).is_empty());
    }

    #[test]
    fn deep_chain_does_not_overflow() {
        let n = 200_000;
        let mut g: Vec<Vec<usize>> = (0..n).map(|i| vec![i + 1]).collect();
        g[n - 1] = vec![0];
        let c = cycles(&g);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].len(), n);
    }
}
