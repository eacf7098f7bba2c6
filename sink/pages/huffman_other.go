//go:build !amd64 || purego

package pages

const hasHuffBMI2 = false

func huffStreamBMI2(st *huffStream, lit *byte, pair *uint32, rounds int, dst *byte) {
	panic("pages: huffStreamBMI2 without BMI2")
}
