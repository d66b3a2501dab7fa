package ledger

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// Hash is a SHA-256 node hash.
type Hash = [sha256.Size]byte

var hasher = rfc6962.DefaultHasher

// Tree keeps every perfect subtree's hash of an append-only RFC 6962 Merkle tree in memory
// (2n hashes for n leaves: 64 MB for a million runs' entries), so that a root, an inclusion
// proof or a consistency proof at any size is a handful of lookups.
type Tree struct {
	levels [][]Hash // levels[l][i]: the node covering leaves [i<<l, (i+1)<<l)
	rng    *compact.Range
}

var factory = &compact.RangeFactory{Hash: hasher.HashChildren}

// NewTree returns an empty tree.
func NewTree() *Tree { return &Tree{rng: factory.NewEmptyRange(0)} }

// Size is the number of leaves.
func (t *Tree) Size() uint64 { return t.rng.End() }

// LeafHash is RFC 6962's hash of a leaf's bytes.
func LeafHash(data []byte) Hash { return Hash(hasher.HashLeaf(data)) }

// Append adds a leaf by its hash.
func (t *Tree) Append(leaf Hash) {
	t.rng.Append(leaf[:], func(id compact.NodeID, h []byte) {
		for uint(len(t.levels)) <= id.Level {
			t.levels = append(t.levels, nil)
		}
		lv := &t.levels[id.Level]
		if uint64(len(*lv)) == id.Index {
			*lv = append(*lv, Hash(h))
		}
	})
}

// Leaf is the hash of leaf i.
func (t *Tree) Leaf(i uint64) Hash { return t.levels[0][i] }

func (t *Tree) node(id compact.NodeID) ([]byte, error) {
	if uint(len(t.levels)) <= id.Level || uint64(len(t.levels[id.Level])) <= id.Index {
		return nil, fmt.Errorf("node %d/%d is not in the tree of %d leaves", id.Level, id.Index, t.Size())
	}
	h := t.levels[id.Level][id.Index]
	return h[:], nil
}

func (t *Tree) hashes(ids []compact.NodeID) ([][]byte, error) {
	out := make([][]byte, len(ids))
	for i, id := range ids {
		h, err := t.node(id)
		if err != nil {
			return nil, err
		}
		out[i] = append([]byte(nil), h...)
	}
	return out, nil
}

// Root is the root hash of the first size leaves: the perfect subtrees its bits name, folded
// from the right (RFC 6962's MTH), from the hashes kept, without allocating.
func (t *Tree) Root(size uint64) (Hash, error) {
	if size > t.Size() {
		return Hash{}, fmt.Errorf("size %d is beyond the tree's %d leaves", size, t.Size())
	}
	if size == 0 {
		return Hash(hasher.EmptyRoot()), nil
	}
	var root Hash
	var buf [1 + 2*sha256.Size]byte
	buf[0] = 1 // RFC 6962's node prefix
	have := false
	for l := 0; size>>l != 0; l++ {
		if size>>l&1 == 0 {
			continue
		}
		h := t.levels[l][size>>l-1] // the subtree of 2^l leaves ending at leaf size
		if !have {
			root, have = h, true
			continue
		}
		copy(buf[1:], h[:])
		copy(buf[1+sha256.Size:], root[:])
		root = sha256.Sum256(buf[:])
	}
	return root, nil
}

// InclusionProof proves leaf index in the tree of size leaves.
func (t *Tree) InclusionProof(index, size uint64) ([][]byte, error) {
	return t.prove(size, func() (proof.Nodes, error) { return proof.Inclusion(index, size) })
}

// ConsistencyProof proves that the tree of size1 leaves is a prefix of the tree of size2.
func (t *Tree) ConsistencyProof(size1, size2 uint64) ([][]byte, error) {
	return t.prove(size2, func() (proof.Nodes, error) { return proof.Consistency(size1, size2) })
}

// prove hashes the nodes a proof over the first size leaves needs.
func (t *Tree) prove(size uint64, nodes func() (proof.Nodes, error)) ([][]byte, error) {
	if size > t.Size() {
		return nil, fmt.Errorf("size %d is beyond the tree's %d leaves", size, t.Size())
	}
	n, err := nodes()
	if err != nil {
		return nil, err
	}
	hs, err := t.hashes(n.IDs)
	if err != nil {
		return nil, err
	}
	return n.Rehash(hs, hasher.HashChildren)
}

// VerifyInclusion checks an inclusion proof of leaf (its hash) at index against root.
func VerifyInclusion(index, size uint64, leaf Hash, p [][]byte, root Hash) error {
	return proof.VerifyInclusion(hasher, index, size, leaf[:], p, root[:])
}

// VerifyConsistency checks that root1 (size1 leaves) is a prefix of root2 (size2).
func VerifyConsistency(size1, size2 uint64, p [][]byte, root1, root2 Hash) error {
	return proof.VerifyConsistency(hasher, size1, size2, p, root1[:], root2[:])
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
