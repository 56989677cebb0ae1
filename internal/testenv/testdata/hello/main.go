// Command hello is a main package for testing BuildBinary.
package main

import "fmt"

func main() { fmt.Println("hello") }
