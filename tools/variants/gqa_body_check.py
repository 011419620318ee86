#!/usr/bin/env python3
"""Checks `gqa_body.py`'s loops on the CPU (no GPU needed): its score loop (one thread per
position, heads in groups of 4) and its output loop (thread (d, slice), four positions at a time,
slices capped by the region) emulated thread by thread for 224 and 512 threads, 1-4 heads per
task, 32-1,024 positions in chunks of 200-1,024, against a direct attention. Asserts that every
score and every (position, dimension) of the output is taken exactly once and prints each case's
slices and relative error (float64: ~1e-15 when the loops are right).

usage: python3 tools/variants/gqa_body_check.py   (a minute or two)
"""
import math, random
def run(NT, hd, hp, L, C, smem_bytes):
    random.seed(NT*7+hp*13+L)
    q=[[random.uniform(-1,1) for _ in range(hd)] for _ in range(hp)]
    K=[[random.uniform(-1,1) for _ in range(hd)] for _ in range(L)]
    V=[[random.uniform(-1,1) for _ in range(hd)] for _ in range(L)]
    scale=1/math.sqrt(hd)
    # scores as the variant: every position once per chunk
    scores=[[None]*L for _ in range(hp)]
    for base in range(0,L,C):
        end=min(base+C,L); c=end-base
        for tid in range(NT):
            for i in range(tid, c, NT):
                for h0 in range(0,hp,4):
                    for u in range(4):
                        if h0+u>=hp: break
                        assert scores[h0+u][base+i] is None
                        scores[h0+u][base+i]=sum(q[h0+u][k]*K[base+i][k] for k in range(hd))*scale
    assert all(x is not None for r in scores for x in r)
    P=[]
    for h in range(hp):
        m=max(scores[h]); e=[math.exp(s-m) for s in scores[h]]; S=sum(e); P.append([x/S for x in e])
    slices=max(1,min(NT//hd, smem_bytes//(4*hp*hd)))
    red={}
    seen=[[0]*hd for _ in range(L)]
    for tid in range(NT):
        d=tid%hd; sl=tid//hd
        if sl>=slices: continue
        acc=[[0.0]*4 for _ in range(4)]
        for base in range(0,L,C):
            end=min(base+C,L)
            pos=base+sl
            while pos+3*slices<end:
                for t in range(4):
                    p2=pos+t*slices; seen[p2][d]+=1
                    for u in range(4):
                        if u<hp: acc[t][u]+=P[u][p2]*V[p2][d]
                pos+=4*slices
            while pos<end:
                seen[pos][d]+=1
                for u in range(4):
                    if u<hp: acc[0][u]+=P[u][pos]*V[pos][d]
                pos+=slices
        for u in range(hp):
            red[(sl*hp+u)*hd+d]=(acc[0][u]+acc[1][u])+(acc[2][u]+acc[3][u])
    assert all(x==1 for r in seen for x in r), "each (pos, d) once"
    outs=hp*hd
    out=[sum(red[sl*outs+idx] for sl in range(slices)) for idx in range(outs)]
    want=[sum(P[h][p]*V[p][d] for p in range(L)) for h in range(hp) for d in range(hd)]
    err=math.sqrt(sum((a-b)**2 for a,b in zip(out,want))/sum(b*b for b in want))
    return slices, err
for NT in (224, 512):
    for hp in (1,2,4):
        for L,C in ((32,200),(160,200),(1024,300),(1024,1024)):
            print(NT,hp,L,C, run(NT,64,hp,L,C, 40000))
print("small region", run(512,64,4,160,200,2048))
print("hd 128", run(224,128,4,160,100,100000))
