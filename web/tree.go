package web

import (
	"strings"

	"stashd/store"
)

// node is one entry of a package's listing shown as a tree.
type node struct {
	Name     string // last path element
	Path     string // full path as listed
	Size     int64
	Dir      bool
	Unsafe   bool // stored name escapes the extraction directory or was cleaned
	Children []*node
}

// buildTree arranges a listing (in archive order) as a tree. Directories
// that are only implied by their files' paths are made up; entries keep
// their archive order within a directory.
func buildTree(files []store.FileEntry) []*node {
	root := &node{Dir: true}
	dirs := map[string]*node{"": root}
	var dir func(path string) *node
	dir = func(path string) *node {
		if n, ok := dirs[path]; ok {
			return n
		}
		parent, name := "", path
		if i := strings.LastIndexByte(path, '/'); i >= 0 {
			parent, name = path[:i], path[i+1:]
		}
		n := &node{Name: name, Path: path, Dir: true}
		p := dir(parent)
		p.Children = append(p.Children, n)
		dirs[path] = n
		return n
	}
	for _, f := range files {
		p := strings.Trim(f.Path, "/")
		if f.Dir {
			n := dir(p)
			n.Unsafe = n.Unsafe || f.Unsafe
			continue
		}
		parent, name := "", p
		if i := strings.LastIndexByte(p, '/'); i >= 0 {
			parent, name = p[:i], p[i+1:]
		}
		pd := dir(parent)
		pd.Children = append(pd.Children, &node{Name: name, Path: f.Path, Size: f.Size, Unsafe: f.Unsafe})
	}
	return root.Children
}
