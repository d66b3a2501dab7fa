// Package sandboxtest gives other packages' root tests a real sandbox host (Linux only).
package sandboxtest
