// Package selfcontained proves that the repository stands alone: one test
// copies the checkout into a directory with nothing beside it and runs the
// unit tier there, so that a test reading outside the checkout (such as the
// steering folder beside it) fails `make test`; another fails on any tracked
// file, docs and scripts included, that refers there.
package selfcontained
