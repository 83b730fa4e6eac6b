# pkc_topk's algorithm (pkc_kernels.cu) simulated on the CPU: each of 512 threads keeps its best k
# of the ids it scans, warps merge their lanes' lists by k rounds of a pick, the first warp merges the
# warps' lists; checked against a full sort (ties, NaN, -inf, masks, k 1/40/64/100). The kernel's own
# test is test_cuda's test_topk on a GPU; this checks the merge logic where there is none.
#   python3 Benchmarks/cuda/topk_sim.py   -> "bad 0"
import random, math
INF=float('inf'); NONE=0x7fffffff
def before(av,ai,bv,bi): return av>bv or (av==bv and ai<bi)
def pick(offers):  # offers: list of (v,i) per lane -> best
    v,i=offers[0]
    for ov,oi in offers[1:]:
        if before(ov,oi,v,i): v,i=ov,oi
    return (v,i)
def topk(row, k, mask=None, T=512, K=64):
    k=min(k,K); n=len(row)
    lists=[]
    for t in range(T):
        lv=[];li=[]
        for i in range(t,n,T):
            if mask is not None and not mask[i]: continue
            v=row[i]
            if v!=v or (len(lv)==k and not (v>lv[k-1])): continue
            if len(lv)<k: lv.append(None); li.append(None); j=len(lv)-1
            else: j=k-1
            while j>0 and v>lv[j-1]: lv[j]=lv[j-1]; li[j]=li[j-1]; j-=1
            lv[j]=v; li[j]=i
        lists.append((lv,li))
    W=T//32; wl=[]
    for w in range(W):
        heads=[0]*32; out=[]
        for j in range(k):
            offers=[]
            for l in range(32):
                lv,li=lists[w*32+l]; h=heads[l]
                offers.append((lv[h],li[h]) if h<len(lv) else (-INF,NONE))
            v,i=pick(offers)
            if i==NONE: out.append((-1,0)); continue
            for l in range(32):
                lv,li=lists[w*32+l]; h=heads[l]
                if h<len(lv) and li[h]==i: heads[l]+=1
            out.append((i,v))
        wl.append(out)
    heads=[0]*32; o=[]
    for j in range(k):
        offers=[]
        for l in range(32):
            if l<W and heads[l]<k and wl[l][heads[l]][0]>=0: offers.append((wl[l][heads[l]][1], wl[l][heads[l]][0]))
            else: offers.append((-INF,NONE))
        v,i=pick(offers)
        if i==NONE: o.append((-1,0)); continue
        for l in range(min(W,32)):
            if heads[l]<k and wl[l][heads[l]][0]==i: heads[l]+=1
        o.append((i,v))
    return o+[(-1,0)]*(K-k)
random.seed(1)
bad=0
for trial in range(40):
    n=random.choice([1000,5000,20000])
    row=[float(round(random.gauss(0,2))) if trial%3==0 else random.gauss(0,3) for _ in range(n)]
    if trial%5==1: row[3]=float('nan')
    if trial%7==2:
        for i in range(0,n,2): row[i]=-INF
    mask=None
    if trial%4==1: mask=[False]*n; [mask.__setitem__(random.randrange(n),True) for _ in range(12)]
    elif trial%4==2: mask=[random.random()<0.8 for _ in range(n)]
    k=random.choice([1,40,64,100])
    got=topk(row,k,mask)
    allv=sorted([(-v,i) for i,v in enumerate(row) if v==v and (mask is None or mask[i])])
    want=[(i,-nv) for nv,i in allv[:min(k,64)]]
    want+= [(-1,0)]*(64-len(want))
    if got!=want: bad+=1; print('trial',trial,'differs')
print('bad',bad)
