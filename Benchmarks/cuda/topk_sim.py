# pkc_topk's algorithm (pkc_kernels.cu) simulated on the CPU: a row in chunks of up to 32 blocks of
# 256 threads; each thread keeps its best k of the ids it scans, warps merge their lanes' lists by k
# rounds of a pick, the first warp the warps', the row's last block the blocks'. Checked against
# a full sort (ties, NaN, -inf, masks, k 1/40/64/100). The kernel's own test is test_cuda's
# test_topk on a GPU; this checks the algorithm where there is none.
#   python3 Benchmarks/cuda/topk_sim.py   -> "bad 0"
import random, math
INF=float('inf'); NONE=0x7fffffff
def before(av,ai,bv,bi): return av>bv or (av==bv and ai<bi)
def pick(offers):  # offers: list of (v,i) per lane -> best
    v,i=offers[0]
    for ov,oi in offers[1:]:
        if before(ov,oi,v,i): v,i=ov,oi
    return (v,i)
def merge(lists, k):  # one warp over up to 32 sorted lists of (id, v), id -1 ending a list
    heads=[0]*len(lists); out=[]
    for j in range(k):
        offers=[(lst[h][1], lst[h][0]) if h<len(lst) and h<k and lst[h][0]>=0 else (-INF,NONE) for lst,h in zip(lists,heads)]
        v,i=pick(offers) if offers else (-INF,NONE)
        if i==NONE: out.append((-1,0)); continue
        for l,lst in enumerate(lists):
            if heads[l]<len(lst) and lst[heads[l]][0]==i: heads[l]+=1
        out.append((i,v))
    return out
def topk(row, k, mask=None, T=256, K=64, B=32):
    k=min(k,K); n=len(row)
    nb=min(B,(n+4095)//4096)
    chunk=((n+nb-1)//nb+31)&~31
    blocks=[]
    for b in range(nb):
        lo=b*chunk; hi=min(n,lo+chunk)
        lists=[]
        for t in range(T):
            lv=[];li=[]
            for i in range(lo+t,hi,T):
                if mask is not None and not mask[i]: continue
                v=row[i]
                if v!=v or (len(lv)==k and not (v>lv[k-1])): continue
                if len(lv)<k: lv.append(None); li.append(None); j=len(lv)-1
                else: j=k-1
                while j>0 and v>lv[j-1]: lv[j]=lv[j-1]; li[j]=li[j-1]; j-=1
                lv[j]=v; li[j]=i
            lists.append(list(zip(li,lv)))
        warps=[merge(lists[w*32:(w+1)*32],k) for w in range(T//32)]
        blocks.append(merge(warps,k))
    return merge(blocks,k)+[(-1,0)]*(K-k)
random.seed(1)
bad=0
for trial in range(40):
    n=random.choice([1000,5000,20000,151936 if trial%10==0 else 40000])
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
