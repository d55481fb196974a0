#include "textflag.h"

// func plainPrefix(b []byte) int
TEXT ·plainPrefix(SB), NOSPLIT, $0-32
	MOVQ b_base+0(FP), SI
	MOVQ b_len+8(FP), BX
	MOVQ SI, DI // the start, to count from

	// X1: 16 quotes, X2: 16 backslashes, X3: 16 times 0x20.
	MOVQ $0x2222222222222222, AX
	MOVQ AX, X1
	PUNPCKLQDQ X1, X1
	MOVQ $0x5c5c5c5c5c5c5c5c, AX
	MOVQ AX, X2
	PUNPCKLQDQ X2, X2
	MOVQ $0x2020202020202020, AX
	MOVQ AX, X3
	PUNPCKLQDQ X3, X3

loop16:
	CMPQ BX, $16
	JB   tail
	MOVOU (SI), X0
	MOVO  X0, X4
	PCMPEQB X1, X4 // a quote
	MOVO  X0, X5
	PCMPEQB X2, X5 // a backslash
	POR   X5, X4
	MOVO  X3, X5
	PCMPGTB X0, X5 // 0x20 > the byte as signed: under 0x20, or 0x80 and over
	POR   X5, X4
	PMOVMSKB X4, AX
	TESTL AX, AX
	JNZ  found
	ADDQ $16, SI
	SUBQ $16, BX
	JMP  loop16

found:
	BSFL AX, AX
	SUBQ DI, SI
	ADDQ SI, AX
	MOVQ AX, ret+24(FP)
	RET

tail:
	TESTQ BX, BX
	JZ    end
	MOVBLZX (SI), AX
	CMPB AL, $0x20
	JB   end
	CMPB AL, $0x80
	JAE  end
	CMPB AL, $0x22
	JEQ  end
	CMPB AL, $0x5c
	JEQ  end
	INCQ SI
	DECQ BX
	JMP  tail

end:
	SUBQ DI, SI
	MOVQ SI, ret+24(FP)
	RET
