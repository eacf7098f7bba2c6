// FOLD8 folds the eight unsigned 32-bit lanes of Y register y into the
// low lane of its X half x with op (VPMINUD or VPMAXUD); tmp is an X
// register it may clobber.
#define FOLD8(op, y, x, tmp) \
	VEXTRACTI128 $1, y, tmp; \
	op tmp, x, x; \
	VPSHUFD $0x4e, x, tmp; \
	op tmp, x, x; \
	VPSHUFD $0xb1, x, tmp; \
	op tmp, x, x
