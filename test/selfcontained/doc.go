// Package selfcontained proves that the repository stands alone: its test
// copies the checkout into a directory with nothing beside it and runs the
// unit tier there, so that a test, script or doc reading outside the
// checkout (such as ../shared) fails `make test`.
package selfcontained
