package limits

import "github.com/gavel-slurm/gavel-slurm/bridge"

// Fair-share shares as entity weights.
//
// Slurm's fair-share tree normalizes raw shares level by level: each
// association below an account gets the account's normalized share times
// its raw shares over the raw shares of all its siblings, users and
// sub-accounts alike (sshare's NormShares). An entity here is an account
// whose users' jobs share it, so its weight is what the account's own
// users get of the tree: its normalized share less what its sub-accounts
// take, which are entities of their own. A deeper tree thus becomes one
// level of entities whose weights are the leaves' global shares, and the
// hierarchical policies split the cluster among accounts as Slurm's
// fair-share targets would; within an account, jobs share as the
// policy's intra-entity rule says.

// AccountWeights returns each account's weight for the policies: its
// users' normalized share of the cluster, scaled so that the largest is
// 1 and none is below minWeight (the policies refuse smaller weights). An
// account whose users all have Fairshare=parent, or that has no users,
// gets nothing. Associations bound to one partition are left out, as
// Slurm's fair-share tree leaves them out of the cluster's.
func AccountWeights(acc *bridge.Accounting, minWeight float64) map[string]float64 {
	if acc == nil {
		return nil
	}
	type node struct {
		raw      float64
		user     bool
		children []int
	}
	var nodes []node
	accountNode := map[string]int{}
	var accounts []bridge.Association
	for _, a := range acc.Associations {
		if a.Partition != "" || a.User != "" {
			continue
		}
		accountNode[a.Account] = len(nodes)
		nodes = append(nodes, node{raw: shareOf(a)})
		accounts = append(accounts, a)
	}
	for i, a := range accounts {
		if parent, ok := accountNode[a.ParentAccount]; ok && a.ParentAccount != a.Account {
			nodes[parent].children = append(nodes[parent].children, i)
		}
	}
	userShares := map[string]float64{} // account → raw shares of its users
	for _, a := range acc.Associations {
		if a.Partition != "" || a.User == "" || a.Shares == bridge.NoLimit {
			continue
		}
		if p, ok := accountNode[a.Account]; ok {
			nodes = append(nodes, node{raw: shareOf(a), user: true})
			nodes[p].children = append(nodes[p].children, len(nodes)-1)
			userShares[a.Account] += shareOf(a)
		}
	}
	norm := make([]float64, len(nodes))
	root, ok := accountNode["root"]
	if !ok {
		return nil
	}
	norm[root] = 1
	// Accounts come before their users in nodes, and a parent's norm is
	// set before its children are visited: walk down from root.
	seen := make([]bool, len(nodes))
	queue := []int{root}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		if seen[n] {
			continue // a loop in a broken tree
		}
		seen[n] = true
		total := 0.0
		for _, c := range nodes[n].children {
			total += nodes[c].raw
		}
		for _, c := range nodes[n].children {
			if total > 0 {
				norm[c] = norm[n] * nodes[c].raw / total
			}
			queue = append(queue, c)
		}
	}
	out := map[string]float64{}
	most := 0.0
	for i, a := range accounts {
		w := 0.0
		for _, c := range nodes[i].children {
			if nodes[c].user {
				w += norm[c]
			}
		}
		if w > 0 {
			out[a.Account] = w
			most = max(most, w)
		}
	}
	for name, w := range out {
		out[name] = max(w/most, minWeight)
	}
	return out
}

// shareOf is an association's raw shares; Fairshare=parent counts as
// Slurm's default of 1 where it must be a sibling's.
func shareOf(a bridge.Association) float64 {
	if a.Shares < 0 {
		return 1
	}
	return float64(a.Shares)
}
