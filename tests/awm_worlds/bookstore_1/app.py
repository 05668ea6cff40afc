import os
from typing import List, Optional

import uvicorn
from fastapi import FastAPI, Query
from pydantic import BaseModel
from sqlalchemy import Column, Float, ForeignKey, Integer, String, create_engine
from sqlalchemy.orm import declarative_base, sessionmaker

DATABASE_PATH = os.environ.get("DATABASE_PATH", "bookstore_1.db")
engine = create_engine(f"sqlite:///{DATABASE_PATH}", connect_args={"check_same_thread": False})
SessionLocal = sessionmaker(autocommit=False, autoflush=False, bind=engine)
Base = declarative_base()


class User(Base):
    __tablename__ = "users"
    id = Column(Integer, primary_key=True)
    name = Column(String, nullable=False)


class Book(Base):
    __tablename__ = "books"
    id = Column(Integer, primary_key=True)
    title = Column(String, nullable=False)
    author = Column(String, nullable=False)
    price = Column(Float, nullable=False)
    stock = Column(Integer, nullable=False)


class Order(Base):
    __tablename__ = "orders"
    id = Column(Integer, primary_key=True)
    user_id = Column(Integer, ForeignKey("users.id"), nullable=False)
    book_id = Column(Integer, ForeignKey("books.id"), nullable=False)
    quantity = Column(Integer, nullable=False)
    status = Column(String, nullable=False)


Base.metadata.create_all(bind=engine)

app = FastAPI(title="Bookstore")


class BookOut(BaseModel):
    id: int
    title: str
    author: str
    price: float
    stock: int


class OrderIn(BaseModel):
    book_id: int
    quantity: int


class OrderOut(BaseModel):
    id: int
    book_id: int
    quantity: int
    status: str


class Message(BaseModel):
    ok: bool
    message: str


@app.get("/books", summary="Search books", description="List books, optionally by author.", tags=["books"],
         operation_id="search_books", response_model=List[BookOut])
async def search_books(author: Optional[str] = Query(None, description="Author name")):
    db = SessionLocal()
    query = db.query(Book)
    if author:
        query = query.filter(Book.author == author)
    books = [BookOut(id=b.id, title=b.title, author=b.author, price=b.price, stock=b.stock) for b in query.all()]
    db.close()
    return books


@app.get("/books/{book_id}", summary="Get a book", description="One book by id.", tags=["books"],
         operation_id="get_book", response_model=BookOut)
async def get_book(book_id: int):
    db = SessionLocal()
    b = db.query(Book).filter(Book.id == book_id).first()
    db.close()
    if b is None:
        return BookOut(id=0, title="", author="", price=0.0, stock=0)
    return BookOut(id=b.id, title=b.title, author=b.author, price=b.price, stock=b.stock)


@app.post("/orders", summary="Place an order", description="Order copies of a book for the user.",
          tags=["orders"], operation_id="place_order", response_model=OrderOut)
async def place_order(order: OrderIn):
    db = SessionLocal()
    row = Order(user_id=1, book_id=order.book_id, quantity=order.quantity, status="pending")
    db.add(row)
    db.flush()  # the order's id
    book = db.query(Book).filter(Book.id == order.book_id).first()
    book.stock = book.stock - order.quantity
    db.commit()
    out = OrderOut(id=row.id, book_id=row.book_id, quantity=row.quantity, status=row.status)
    db.close()
    return out


@app.get("/orders", summary="My orders", description="The user's orders.", tags=["orders"],
         operation_id="list_my_orders", response_model=List[OrderOut])
async def list_my_orders():
    db = SessionLocal()
    rows = db.query(Order).filter(Order.user_id == 1).all()
    out = [OrderOut(id=o.id, book_id=o.book_id, quantity=o.quantity, status=o.status) for o in rows]
    db.close()
    return out


@app.post("/orders/{order_id}/cancel", summary="Cancel an order", description="Cancel one of the user's orders.",
          tags=["orders"], operation_id="cancel_order", response_model=Message)
async def cancel_order(order_id: int):
    db = SessionLocal()
    row = db.query(Order).filter(Order.id == order_id, Order.user_id == 1).first()
    row.status = "cancelled"
    db.commit()
    db.close()
    return Message(ok=True, message=f"order {order_id} cancelled")


if __name__ == "__main__":
    uvicorn.run(app, host=os.environ.get("HOST", "127.0.0.1"), port=int(os.environ.get("PORT", "8001")))
